// Namespaces (issue 22 item 6) with rocketmq-client-nodejs@1.0.8 against a broker started here:
// two namespaces with the same topic and group names keep their messages apart, answers echo
// the namespace in resource_namespace, bad namespaces are refused in RocketMQ's terms, and the
// native CLI (--namespace) sees the same resources. Run with
// tests/rocketmq/run.sh <build-dir> rocketmq_namespace.test.js.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const pb = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb');
const defs = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const { MessagingServiceClient } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_grpc_pb');
const { quietLogger, runCli, startInTempDir, teardown } = require('./test_helpers');

const TOPIC = 'ns_orders';  // the same name in both namespaces
const GROUP = 'ns_billing';
const OK = 20000;
const ILLEGAL_TOPIC = 40002;
const TOPIC_NOT_FOUND = 40402;

let broker;
let dataDir;
let nativeAddr;
let endpoints;

before(async () => {
  ({ dataDir, broker, nativeAddr, endpoints } = await startInTempDir('tokimq-rmq-ns-'));
  for (const ns of ['team_a', 'team-b']) {
    await runCli(nativeAddr, ['--namespace', ns, 'topic', 'create', '--name', TOPIC, '--queues', '2']);
  }
});

after(() => teardown(dataDir, [broker]));

// Receives until `n` messages arrived or `ms` passed, acking each.
async function receiveAll(consumer, n, ms) {
  const out = [];
  const deadline = Date.now() + ms;
  while (out.length < n && Date.now() < deadline) {
    for (const mv of await consumer.receive(16, 10000)) {
      out.push(mv);
      await consumer.ack(mv);
    }
  }
  return out;
}

function unary(client, method, req, namespace) {
  const md = new grpc.Metadata();
  if (namespace) md.set('x-mq-namespace', namespace);
  return new Promise((resolve, reject) => {
    client[method](req, md, { deadline: Date.now() + 10000 }, (err, res) => {
      if (err) reject(err); else resolve(res);
    });
  });
}

describe('RocketMQ namespaces (issue 22 item 6)', () => {
  it('two namespaces with the same topic and group names do not see each other\'s messages', async () => {
    const clients = [];
    try {
      const side = {};
      for (const ns of ['team_a', 'team-b']) {
        const producer = new Producer({ endpoints, namespace: ns, topics: [TOPIC], logger: quietLogger });
        await producer.startup();
        clients.push(producer);
        const consumer = new SimpleConsumer({
          endpoints, namespace: ns, consumerGroup: GROUP, logger: quietLogger,
          subscriptions: new Map([[TOPIC, '*']]), awaitDuration: 1000,
        });
        await consumer.startup();
        clients.push(consumer);
        side[ns] = { producer, consumer };
      }
      for (let i = 0; i < 3; i++) {
        await side.team_a.producer.send({ topic: TOPIC, body: Buffer.from(`a${i}`), tag: 't' });
        await side['team-b'].producer.send({ topic: TOPIC, body: Buffer.from(`b${i}`), tag: 't' });
      }
      const gotA = await receiveAll(side.team_a.consumer, 3, 10000);
      const gotB = await receiveAll(side['team-b'].consumer, 3, 10000);
      assert.deepEqual(gotA.map((m) => m.body.toString()).sort(), ['a0', 'a1', 'a2']);
      assert.deepEqual(gotB.map((m) => m.body.toString()).sort(), ['b0', 'b1', 'b2']);
      // Names come back without the namespace.
      for (const m of [...gotA, ...gotB]) assert.equal(m.topic, TOPIC);
      // Nothing more for either group (the other side's messages never arrive).
      assert.equal((await side.team_a.consumer.receive(16, 10000)).length, 0);
      assert.equal((await side['team-b'].consumer.receive(16, 10000)).length, 0);
    } finally {
      for (const c of clients.reverse()) await c.shutdown();
    }
  });

  it('the global namespace has no such topic', async () => {
    const producer = new Producer({ endpoints, namespace: '', logger: quietLogger });
    await producer.startup();
    try {
      await assert.rejects(producer.send({ topic: TOPIC, body: Buffer.from('x') }), (err) => {
        assert.equal(err.code, TOPIC_NOT_FOUND);
        return true;
      });
    } finally {
      await producer.shutdown();
    }
  });

  it('answers give the resource back with its resource_namespace', async () => {
    const client = new MessagingServiceClient(endpoints, grpc.credentials.createInsecure());
    try {
      // Namespace in the resource (Java / Go clients).
      let r = await unary(client, 'queryRoute', new pb.QueryRouteRequest()
        .setTopic(new defs.Resource().setName(TOPIC).setResourceNamespace('team_a')));
      assert.equal(r.getStatus().getCode(), OK, r.getStatus().getMessage());
      assert.equal(r.getMessageQueuesList().length, 2);
      for (const mq of r.getMessageQueuesList()) {
        assert.equal(mq.getTopic().getName(), TOPIC);
        assert.equal(mq.getTopic().getResourceNamespace(), 'team_a');
      }
      // Namespace in the x-mq-namespace header only (the Node.js client's consumers).
      r = await unary(client, 'queryAssignment', new pb.QueryAssignmentRequest()
        .setTopic(new defs.Resource().setName(TOPIC))
        .setGroup(new defs.Resource().setName(GROUP)), 'team-b');
      assert.equal(r.getStatus().getCode(), OK, r.getStatus().getMessage());
      const mq = r.getAssignmentsList()[0].getMessageQueue();
      assert.equal(mq.getTopic().getName(), TOPIC);
      assert.equal(mq.getTopic().getResourceNamespace(), 'team-b');
      // Neither: the global namespace, which has no such topic.
      r = await unary(client, 'queryRoute', new pb.QueryRouteRequest()
        .setTopic(new defs.Resource().setName(TOPIC)));
      assert.equal(r.getStatus().getCode(), TOPIC_NOT_FOUND, r.getStatus().getMessage());
    } finally {
      client.close();
    }
  });

  it('a bad namespace is refused as an illegal topic naming the namespace rule', async () => {
    const client = new MessagingServiceClient(endpoints, grpc.credentials.createInsecure());
    try {
      for (const ns of ['bad.ns', 'a%b', 'n'.repeat(65)]) {
        const r = await unary(client, 'queryRoute', new pb.QueryRouteRequest()
          .setTopic(new defs.Resource().setName(TOPIC).setResourceNamespace(ns)));
        assert.equal(r.getStatus().getCode(), ILLEGAL_TOPIC, ns);
        assert.match(r.getStatus().getMessage(), /a namespace is 1\.\.64 characters of \[A-Za-z0-9_-\]/);
      }
    } finally {
      client.close();
    }
    const producer = new Producer({ endpoints, namespace: 'bad.ns', topics: [TOPIC], logger: quietLogger });
    await assert.rejects(producer.startup());
  });

  it('the native CLI sees the same resources in a namespace', async () => {
    const listA = await runCli(nativeAddr, ['--namespace', 'team_a', 'topic', 'list']);
    assert.match(listA, new RegExp(`^${TOPIC}\\b`, 'm'));
    assert.doesNotMatch(listA, /team/);
    const all = await runCli(nativeAddr, ['topic', 'list']);
    assert.match(all, new RegExp(`^team_a%${TOPIC}\\b`, 'm'));
    assert.match(all, new RegExp(`^team-b%${TOPIC}\\b`, 'm'));
    // Sent natively in team_a, received by the RocketMQ consumer of team_a.
    await runCli(nativeAddr, ['--namespace', 'team_a', 'send', '--topic', TOPIC, '--body', 'native']);
    const consumer = new SimpleConsumer({
      endpoints, namespace: 'team_a', consumerGroup: GROUP, logger: quietLogger,
      subscriptions: new Map([[TOPIC, '*']]), awaitDuration: 1000,
    });
    await consumer.startup();
    try {
      const got = await receiveAll(consumer, 1, 10000);
      assert.deepEqual(got.map((m) => m.body.toString()), ['native']);
    } finally {
      await consumer.shutdown();
    }
    await assert.rejects(runCli(nativeAddr, ['--namespace', 'bad.ns', 'topic', 'list']));
  });
});
