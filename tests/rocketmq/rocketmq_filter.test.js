// RocketMQ 5 clients against tokimq, issue 22 items 5 and 8: a SimpleConsumer of the official
// Node.js client with a SQL92 filter, and the PullConsumer RPCs (QueryOffset, PullMessage,
// GetOffset, UpdateOffset) called through the client's generated gRPC stubs (1.0.8 has no
// PullConsumer). Run with tests/rocketmq/run.sh <build-dir> rocketmq_filter.test.js.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { Producer, SimpleConsumer, FilterExpression } = require('rocketmq-client-nodejs');
const pb = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb');
const defs = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const { MessagingServiceClient } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_grpc_pb');
const { quietLogger, runCli, startInTempDir, teardown, codeOf } = require('./test_helpers');

const SQL_TOPIC = 'rmq_sql';
const PULL_TOPIC = 'rmq_pull';
const OK = 20000;
const MESSAGE_NOT_FOUND = 40401;
const OFFSET_NOT_FOUND = 40404;
const ILLEGAL_OFFSET = 40019;
const ILLEGAL_FILTER_EXPRESSION = 40010;
const ILLEGAL_TOPIC = 40002;
const ILLEGAL_CONSUMER_GROUP = 40003;

let broker;
let dataDir;
let nativeAddr;
let endpoints;

before(async () => {
  ({ dataDir, broker, nativeAddr, endpoints } = await startInTempDir('tokimq-rmq-filter-'));
  await runCli(nativeAddr, ['topic', 'create', '--name', SQL_TOPIC, '--type', 'normal', '--queues', '2']);
  await runCli(nativeAddr, ['topic', 'create', '--name', PULL_TOPIC, '--type', 'normal', '--queues', '1']);
});

after(() => teardown(dataDir, [broker]));

function queueOf(topic, id) {
  return new defs.MessageQueue().setTopic(new defs.Resource().setName(topic)).setId(id);
}

function unary(client, method, req) {
  return new Promise((resolve, reject) => {
    client[method](req, new grpc.Metadata(), { deadline: Date.now() + 10000 }, (err, res) => {
      if (err) reject(err); else resolve(res);
    });
  });
}

// PullMessage's stream as { code, bodies, nextOffset }.
function pull(client, group, offset, batch, sql) {
  const req = new pb.PullMessageRequest()
    .setGroup(new defs.Resource().setName(group))
    .setMessageQueue(queueOf(PULL_TOPIC, 0))
    .setOffset(offset)
    .setBatchSize(batch);
  if (sql) {
    req.setFilterExpression(new defs.FilterExpression().setType(defs.FilterType.SQL).setExpression(sql));
  }
  return new Promise((resolve, reject) => {
    const out = { code: undefined, bodies: [], offsets: [], nextOffset: undefined };
    const stream = client.pullMessage(req, new grpc.Metadata(), { deadline: Date.now() + 10000 });
    stream.on('data', (r) => {
      if (r.hasStatus()) out.code = r.getStatus().getCode();
      if (r.hasMessage()) {
        out.bodies.push(Buffer.from(r.getMessage().getBody_asU8()).toString());
        out.offsets.push(r.getMessage().getSystemProperties().getQueueOffset());
        assert.ok(!r.getMessage().getSystemProperties().getReceiptHandle(), 'no receipt handle on a pull');
      }
      if (r.getContentCase() === pb.PullMessageResponse.ContentCase.NEXT_OFFSET) out.nextOffset = r.getNextOffset();
    });
    stream.on('error', reject);
    stream.on('end', () => resolve(out));
  });
}

describe('SQL92 filters and offset-based consumption', { concurrency: true }, () => {
  it('SimpleConsumer with a SQL92 filter receives only matching messages; a bad one is refused',
    { timeout: 60000 }, async () => {
      const producer = new Producer({ endpoints, namespace: '', topics: [SQL_TOPIC], logger: quietLogger });
      await producer.startup();
      const sent = [
        ['eu-250', { region: 'eu', amount: '250' }, 'a'],
        ['eu-5', { region: 'eu', amount: '5' }, 'a'],
        ['us-900', { region: 'us', amount: '900' }, 'b'],
        ['none', {}, 'a'],
        ['eu-bad', { region: 'eu', amount: 'lots' }, 'b'],
        ['apac-101', { region: 'apac', amount: '101' }, 'b'],
      ];
      for (const [body, props, tag] of sent) {
        await producer.send({ topic: SQL_TOPIC, body: Buffer.from(body), tag,
          properties: new Map(Object.entries(props)) });
      }
      await producer.shutdown();

      const consumer = new SimpleConsumer({
        endpoints, namespace: '', consumerGroup: 'g_sql', logger: quietLogger, awaitDuration: 2000,
        subscriptions: new Map([[SQL_TOPIC, new FilterExpression(
          "region IN ('eu', 'apac') AND amount > 100", defs.FilterType.SQL)]]),
      });
      await consumer.startup();
      const got = [];
      try {
        const deadline = Date.now() + 20000;
        while (got.length < 2 && Date.now() < deadline) {
          for (const m of await consumer.receive(16, 15000)) {
            got.push(m.body.toString());
            await consumer.ack(m);
          }
        }
        // What the filter skipped is consumed for the group: nothing more comes.
        assert.deepEqual(await consumer.receive(16, 15000), []);
      } finally {
        await consumer.shutdown();
      }
      assert.deepEqual(got.sort(), ['apac-101', 'eu-250']);

      // The native CLI with the same kind of filter, in a group of its own.
      const cliOut = await runCli(nativeAddr, ['consume', '--group', 'g_sql_cli', '--topic', SQL_TOPIC,
        '--ack', '--count', '0', '--wait', '1s', '--sql-filter', "region = 'us' OR amount IS NULL"]);
      const bodies = cliOut.split('\n').filter((l) => l.length > 0).map((l) => l.split('\t')[1]);
      assert.deepEqual(bodies.sort(), ['none', 'us-900']);

      const bad = new SimpleConsumer({
        endpoints, namespace: '', consumerGroup: 'g_sql_bad', logger: quietLogger, awaitDuration: 1000,
        subscriptions: new Map([[SQL_TOPIC, new FilterExpression("amount > 'x'", defs.FilterType.SQL)]]),
      });
      await bad.startup();
      try {
        await assert.rejects(bad.receive(1, 15000), (err) => {
          assert.equal(codeOf(err), ILLEGAL_FILTER_EXPRESSION, String(err));
          assert.match(String(err.message), /sql filter: only numbers can be compared/);
          return true;
        });
      } finally {
        await bad.shutdown();
      }
    });

  it('QueryOffset, PullMessage, GetOffset, UpdateOffset over the consume queue', { timeout: 60000 }, async () => {
    const producer = new Producer({ endpoints, namespace: '', topics: [PULL_TOPIC], logger: quietLogger });
    await producer.startup();
    for (let i = 0; i < 5; i++) {
      await producer.send({ topic: PULL_TOPIC, body: Buffer.from(`m${i}`), properties: new Map([['n', String(i)]]) });
    }
    await producer.shutdown();

    const client = new MessagingServiceClient(endpoints, grpc.credentials.createInsecure());
    try {
      const query = (policy) => unary(client, 'queryOffset',
        new pb.QueryOffsetRequest().setMessageQueue(queueOf(PULL_TOPIC, 0)).setQueryOffsetPolicy(policy));
      let r = await query(defs.QueryOffsetPolicy.BEGINNING);
      assert.equal(r.getStatus().getCode(), OK, r.getStatus().getMessage());
      assert.equal(r.getOffset(), 0);
      r = await query(defs.QueryOffsetPolicy.END);
      assert.equal(r.getOffset(), 5);

      let p = await pull(client, 'g_pull', 1, 3);
      assert.equal(p.code, OK);
      assert.deepEqual(p.bodies, ['m1', 'm2', 'm3']);
      assert.deepEqual(p.offsets, [1, 2, 3]);
      assert.equal(p.nextOffset, 4);
      // No lease: the same offset reads the same messages again.
      assert.deepEqual((await pull(client, 'g_pull', 1, 3)).bodies, ['m1', 'm2', 'm3']);
      p = await pull(client, 'g_pull', 0, 10, 'n >= 3');
      assert.deepEqual(p.bodies, ['m3', 'm4']);
      assert.equal(p.nextOffset, 5);
      p = await pull(client, 'g_pull', 5, 10);
      assert.equal(p.code, MESSAGE_NOT_FOUND);
      assert.equal(p.nextOffset, 5);
      p = await pull(client, 'g_pull', 99, 10);
      assert.equal(p.code, ILLEGAL_OFFSET);
      assert.equal(p.nextOffset, 5);
      p = await pull(client, 'g_pull', 0, 10, 'n > \'x\'');
      assert.equal(p.code, ILLEGAL_FILTER_EXPRESSION);

      const getOffset = () => unary(client, 'getOffset', new pb.GetOffsetRequest()
        .setGroup(new defs.Resource().setName('g_pull')).setMessageQueue(queueOf(PULL_TOPIC, 0)));
      r = await getOffset();
      assert.equal(r.getStatus().getCode(), OFFSET_NOT_FOUND, r.getStatus().getMessage());
      r = await unary(client, 'updateOffset', new pb.UpdateOffsetRequest()
        .setGroup(new defs.Resource().setName('g_pull')).setMessageQueue(queueOf(PULL_TOPIC, 0)).setOffset(4));
      assert.equal(r.getStatus().getCode(), OK, r.getStatus().getMessage());
      r = await getOffset();
      assert.equal(r.getStatus().getCode(), OK);
      assert.equal(r.getOffset(), 4);
    } finally {
      client.close();
    }
  });

  it('the offset RPCs check the group name first, then the topic name', async () => {
    const client = new MessagingServiceClient(endpoints, grpc.credentials.createInsecure());
    const group = (name) => new defs.Resource().setName(name);
    try {
      for (const [g, topic, want] of [
        ['bad group!', 'bad topic!', ILLEGAL_CONSUMER_GROUP],
        ['g_names', 'bad topic!', ILLEGAL_TOPIC],
      ]) {
        const mq = queueOf(topic, 0);
        const pulled = await new Promise((resolve, reject) => {
          const req = new pb.PullMessageRequest().setGroup(group(g)).setMessageQueue(mq).setBatchSize(1);
          const codes = [];
          const stream = client.pullMessage(req, new grpc.Metadata(), { deadline: Date.now() + 10000 });
          stream.on('data', (r) => { if (r.hasStatus()) codes.push(r.getStatus().getCode()); });
          stream.on('error', reject);
          stream.on('end', () => resolve(codes));
        });
        assert.deepEqual(pulled, [want], `PullMessage ${g} / ${topic}`);
        let r = await unary(client, 'getOffset', new pb.GetOffsetRequest().setGroup(group(g)).setMessageQueue(mq));
        assert.equal(r.getStatus().getCode(), want, `GetOffset ${g} / ${topic}`);
        r = await unary(client, 'updateOffset',
          new pb.UpdateOffsetRequest().setGroup(group(g)).setMessageQueue(mq).setOffset(0));
        assert.equal(r.getStatus().getCode(), want, `UpdateOffset ${g} / ${topic}`);
      }
      // QueryOffset names no group: only the topic is checked.
      const r = await unary(client, 'queryOffset', new pb.QueryOffsetRequest()
        .setMessageQueue(queueOf('bad topic!', 0)).setQueryOffsetPolicy(defs.QueryOffsetPolicy.BEGINNING));
      assert.equal(r.getStatus().getCode(), ILLEGAL_TOPIC);
    } finally {
      client.close();
    }
  });
});
