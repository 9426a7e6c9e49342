// The official RocketMQ Node.js client (rocketmq-client-nodejs@1.0.8) against a tokimq cluster
// of etcd + three brokers (issue 19 items 6 and 9). Started by the C++ harness
// (tests/cluster_integration/nodejs_cluster_test.cc), which creates the topics and passes the
// brokers in TOKIMQ_CLUSTER_BROKERS = JSON [{name, native, grpc}, ...].
//
// The client keeps only queue id 0 of each broker (it compares queue ids with MASTER_BROKER_ID),
// so a route of N brokers is N queues to it: sends round robin over the brokers, each receive
// goes to the next broker, acks go to the endpoint of the broker that delivered the message.
'use strict';
const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');
const pb = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb');
const defs = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const { MessagingServiceClient } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_grpc_pb');
const { sleep, quietLogger } = require('./test_helpers');

const brokers = JSON.parse(process.env.TOKIMQ_CLUSTER_BROKERS || '[]');
const DELAY_TOPIC = 'rmq_c_delay';  // delay, 2 queues on each of the 3 brokers
const PUSH_TOPIC = 'rmq_c_push';    // normal, 2 queues on each
const PAIR_TOPIC = 'rmq_c_pair';    // normal, 1 queue on b0 and b1 only
const OK = 20000;
const NOT_FOUND = 40400;
const N_NOW = 30;
const N_DELAYED = 30;
const DELAY_MS = 2000;
const N_PUSH = 30;

after(() => {
  // rocketmq-client-nodejs 1.0.8's PushConsumer leaves a timer armed after shutdown().
  setTimeout(() => process.exit(process.exitCode ?? 0), 3000).unref();
});

function unary(client, method, req) {
  return new Promise((resolve, reject) => {
    client[method](req, new grpc.Metadata(), { deadline: Date.now() + 10000 }, (err, res) => {
      if (err) reject(err); else resolve(res);
    });
  });
}

function endpointsOf(hostPort) {
  const [host, port] = hostPort.split(':');
  const e = new defs.Endpoints().setScheme(defs.AddressScheme.IPV4);
  e.addAddresses(new defs.Address().setHost(host).setPort(Number(port)));  // returns the address
  return e;
}

// broker name -> sorted queue ids, and broker name -> "host:port" of its queues.
function byBroker(queues) {
  const ids = {};
  const at = {};
  for (const mq of queues) {
    const b = mq.getBroker();
    (ids[b.getName()] ??= []).push(mq.getId());
    const a = b.getEndpoints().getAddressesList()[0];
    at[b.getName()] = `${a.getHost()}:${a.getPort()}`;
    assert.equal(b.getId(), 0, 'broker id 0 (the leader)');
  }
  for (const k of Object.keys(ids)) ids[k].sort((x, y) => x - y);
  return { ids, at };
}

describe('RocketMQ 5 Node.js client against a 3-broker tokimq cluster', () => {
  it('has three brokers to talk to', () => {
    assert.equal(brokers.length, 3, 'TOKIMQ_CLUSTER_BROKERS');
  });

  it('QueryRoute and QueryAssignment list every hosting broker at its own gRPC endpoint, queue ids from 0',
    { timeout: 30000 }, async () => {
      const client = new MessagingServiceClient(brokers[1].grpc, grpc.credentials.createInsecure());
      try {
        const route = await unary(client, 'queryRoute', new pb.QueryRouteRequest()
          .setTopic(new defs.Resource().setName(DELAY_TOPIC)).setEndpoints(endpointsOf(brokers[1].grpc)));
        assert.equal(route.getStatus().getCode(), OK, route.getStatus().getMessage());
        const { ids, at } = byBroker(route.getMessageQueuesList());
        for (const b of brokers) {
          assert.deepEqual(ids[b.name], [0, 1], `queues of ${b.name}`);
          assert.equal(at[b.name], b.grpc, `endpoint of ${b.name}`);
        }
        const pair = await unary(client, 'queryRoute', new pb.QueryRouteRequest()
          .setTopic(new defs.Resource().setName(PAIR_TOPIC)).setEndpoints(endpointsOf(brokers[1].grpc)));
        assert.deepEqual(Object.keys(byBroker(pair.getMessageQueuesList()).ids).sort(), ['b0', 'b1']);

        const asg = await unary(client, 'queryAssignment', new pb.QueryAssignmentRequest()
          .setTopic(new defs.Resource().setName(PUSH_TOPIC)).setGroup(new defs.Resource().setName('g_c_push'))
          .setEndpoints(endpointsOf(brokers[1].grpc)));
        assert.equal(asg.getStatus().getCode(), OK, asg.getStatus().getMessage());
        const a = byBroker(asg.getAssignmentsList().map((x) => x.getMessageQueue()));
        for (const b of brokers) {
          assert.deepEqual(a.ids[b.name], [-1], `assignment of ${b.name}`);
          assert.equal(a.at[b.name], b.grpc);
        }
      } finally {
        client.close();
      }
    });

  it('a request for another broker\'s queue or a topic not placed here is NOT_FOUND naming the owner',
    { timeout: 30000 }, async () => {
      const b0 = new MessagingServiceClient(brokers[0].grpc, grpc.credentials.createInsecure());
      const b2 = new MessagingServiceClient(brokers[2].grpc, grpc.credentials.createInsecure());
      try {
        const mq = new defs.MessageQueue().setTopic(new defs.Resource().setName(DELAY_TOPIC)).setId(0)
          .setBroker(new defs.Broker().setName('b1').setId(0).setEndpoints(endpointsOf(brokers[1].grpc)));
        const statuses = await new Promise((resolve, reject) => {
          const out = [];
          const s = b0.receiveMessage(new pb.ReceiveMessageRequest().setGroup(new defs.Resource().setName('g_c'))
            .setMessageQueue(mq).setBatchSize(1), new grpc.Metadata(), { deadline: Date.now() + 10000 });
          s.on('data', (r) => { if (r.hasStatus()) out.push(r.getStatus()); });
          s.on('error', reject);
          s.on('end', () => resolve(out));
        });
        assert.equal(statuses.length, 1);
        assert.equal(statuses[0].getCode(), NOT_FOUND);
        assert.match(statuses[0].getMessage(), new RegExp(`on broker 'b1' \\(gRPC ${brokers[1].grpc}\\), not on this broker 'b0'`));

        const msg = new defs.Message().setTopic(new defs.Resource().setName(PAIR_TOPIC)).setBody(Buffer.from('x'))
          .setSystemProperties(new defs.SystemProperties().setMessageId('01C0FFEE00000000000000000001')
            .setBodyEncoding(defs.Encoding.IDENTITY).setMessageType(defs.MessageType.NORMAL));
        const sendReq = new pb.SendMessageRequest();
        sendReq.addMessages(msg);
        const sent = await unary(b2, 'sendMessage', sendReq);
        assert.equal(sent.getStatus().getCode(), NOT_FOUND, sent.getStatus().getMessage());
        assert.match(sent.getStatus().getMessage(), /not placed on this broker 'b2'.*'b0' \(gRPC .*'b1' \(gRPC /);
      } finally {
        b0.close();
        b2.close();
      }
    });

  it('Producer spreads normal and delayed sends over the brokers; SimpleConsumer receives and acks from all',
    { timeout: 90000 }, async () => {
      const producer = new Producer({ endpoints: brokers[1].grpc, namespace: '', topics: [DELAY_TOPIC], logger: quietLogger });
      await producer.startup();
      const deliverAt = new Map();  // body -> earliest time (ms)
      const split = {};
      try {
        for (let i = 0; i < N_NOW + N_DELAYED; i++) {
          const body = `c-${i}`;
          const m = { topic: DELAY_TOPIC, body: Buffer.from(body), tag: 't' };
          let at = 0;
          if (i >= N_NOW) {
            at = Date.now() + DELAY_MS;
            m.deliveryTimestamp = new Date(at);
          }
          const receipt = await producer.send(m);
          deliverAt.set(body, at);
          const name = receipt.messageQueue.broker.name;
          split[name] = (split[name] ?? 0) + 1;
        }
      } finally {
        await producer.shutdown();
      }
      console.log(`producer split over brokers: ${JSON.stringify(split)}`);
      for (const b of brokers) assert.ok(split[b.name] >= 10, `${b.name} got ${split[b.name]} of 60 sends`);

      const consumer = new SimpleConsumer({ endpoints: brokers[2].grpc, namespace: '', consumerGroup: 'g_c',
        subscriptions: new Map([[DELAY_TOPIC, '*']]), awaitDuration: 1000, logger: quietLogger });
      await consumer.startup();
      const seen = new Set();
      const from = {};
      let duplicates = 0;
      let early = 0;
      try {
        const deadline = Date.now() + 60000;
        while (seen.size < deliverAt.size && Date.now() < deadline) {
          const got = await consumer.receive(16, 30000);
          const now = Date.now();
          for (const mv of got) {
            const body = mv.body.toString();
            if (seen.has(body)) duplicates++;
            seen.add(body);
            if (now < deliverAt.get(body)) early++;
            from[mv.endpoints.facade] = (from[mv.endpoints.facade] ?? 0) + 1;
            await consumer.ack(mv);  // to the endpoint of the broker that delivered it
          }
        }
        // Everything acked: nothing comes back from any broker within a round of receives.
        let again = 0;
        for (let i = 0; i < brokers.length; i++) again += (await consumer.receive(16, 30000)).length;
        assert.equal(again, 0, 'acked messages came back');
      } finally {
        await consumer.shutdown();
      }
      console.log(`SimpleConsumer received per broker endpoint: ${JSON.stringify(from)}`);
      assert.equal(seen.size, deliverAt.size);
      assert.equal(duplicates, 0);
      assert.equal(early, 0, 'a delayed message came before its time');
      for (const b of brokers) assert.equal(from[b.grpc], split[b.name], `received from ${b.name}`);
    });

  it('PushConsumer consumes from every broker (one assignment per broker)', { timeout: 90000 }, async () => {
    const consumed = new Map();  // body -> broker endpoint
    let resolveAll;
    const allConsumed = new Promise((r) => { resolveAll = r; });
    const push = new PushConsumer({
      endpoints: brokers[0].grpc, namespace: '', consumerGroup: 'g_c_push', logger: quietLogger,
      subscriptions: new Map([[PUSH_TOPIC, '*']]),
      messageListener: {
        consume(mv) {
          consumed.set(mv.body.toString(), mv.endpoints.facade);
          if (consumed.size === N_PUSH) resolveAll();
          return ConsumeResult.SUCCESS;
        },
      },
    });
    await push.startup();
    const producer = new Producer({ endpoints: brokers[2].grpc, namespace: '', topics: [PUSH_TOPIC], logger: quietLogger });
    await producer.startup();
    try {
      for (let i = 0; i < N_PUSH; i++) await producer.send({ topic: PUSH_TOPIC, body: Buffer.from(`p-${i}`) });
      await Promise.race([allConsumed, sleep(45000)]);
    } finally {
      await producer.shutdown();
      await push.shutdown();
    }
    const from = {};
    for (const e of consumed.values()) from[e] = (from[e] ?? 0) + 1;
    console.log(`PushConsumer consumed per broker endpoint: ${JSON.stringify(from)}`);
    assert.equal(consumed.size, N_PUSH);
    for (const b of brokers) assert.ok(from[b.grpc] > 0, `nothing consumed from ${b.name}`);
  });
});
