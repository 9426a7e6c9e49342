// The official RocketMQ Node.js client (rocketmq-client-nodejs@1.0.8) recalling delayed
// messages in a tokimq cluster of etcd + three brokers with --auth (issue 19: recall across
// brokers, users in etcd). Started by tests/cluster_integration/recall_cluster_test.cc, which
// creates the topics and the user, and passes TOKIMQ_CLUSTER_BROKERS = JSON [{name, native,
// grpc}, ...] and TOKIMQ_RECALL_CREDENTIALS = JSON {accessKey, accessSecret}.
//
// The client sends RecallMessage to its access point (Producer.recallMessage calls
// this.endpoints), never to the broker that stored the message: broker b0 here. The recall
// handle names the broker that issued it; b0 forwards the recall of b1's and b2's messages to
// them as the calling user.
'use strict';
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { quietLogger } = require('./test_helpers');

const brokers = JSON.parse(process.env.TOKIMQ_CLUSTER_BROKERS || '[]');
const sessionCredentials = JSON.parse(process.env.TOKIMQ_RECALL_CREDENTIALS || 'null') ?? undefined;
const TOPIC = 'rc_delay';   // delay, 1 queue on each of the 3 brokers
const OTHER = 'rc_other';   // delay, the user may publish on it too
const GROUP = 'g_rc';
const N = 12;               // half of them recalled
const DELAY_MS = 10000;

describe('RocketMQ 5 Node.js client: recall across the brokers of a cluster', () => {
  it('recalls through its access point the delayed messages every broker stored; only the others arrive',
    { timeout: 90000 }, async () => {
      assert.equal(brokers.length, 3, 'TOKIMQ_CLUSTER_BROKERS');
      const producer = new Producer({ endpoints: brokers[0].grpc, namespace: '', topics: [TOPIC],
        sessionCredentials, logger: quietLogger });
      await producer.startup();
      const kept = new Set();
      const recalledFrom = {};
      let deliverAt = 0;
      try {
        const receipts = [];
        deliverAt = Date.now() + DELAY_MS;
        for (let i = 0; i < N; i++) {
          const recall = i % 2 === 1;
          const body = `${recall ? 'recalled' : 'kept'}-${i}`;
          const r = await producer.send({ topic: TOPIC, body: Buffer.from(body), deliveryTimestamp: new Date(deliverAt) });
          const broker = r.messageQueue.broker.name;
          // "<message id>:<broker>|<handle>": the handle names the broker that issued it.
          assert.match(r.recallHandle, new RegExp(`^${r.messageId}:${broker}\\|[0-9a-f]{50}$`));
          if (recall) receipts.push({ r, broker }); else kept.add(body);
        }
        for (const { r, broker } of receipts) {
          const rr = await producer.recallMessage(TOPIC, r.recallHandle);
          assert.equal(rr.messageId, r.messageId);
          recalledFrom[broker] = (recalledFrom[broker] ?? 0) + 1;
        }
        console.log(`recalled through ${brokers[0].name}, per issuing broker: ${JSON.stringify(recalledFrom)}`);
        for (const b of brokers) assert.ok(recalledFrom[b.name] > 0, `no message of ${b.name} recalled`);
        const remote = receipts.find((x) => x.broker !== brokers[0].name);
        // Again: the owner answers that it is recalled already (forwarded, its answer kept).
        await assert.rejects(producer.recallMessage(TOPIC, remote.r.recallHandle), /already recalled/);
        // Under another topic (one the user may publish on): refused by the owner, the message
        // is not of that topic.
        const other = await producer.send({ topic: TOPIC, body: Buffer.from('kept-other'), deliveryTimestamp: new Date(deliverAt) });
        kept.add('kept-other');
        await assert.rejects(producer.recallMessage(OTHER, other.recallHandle), /no scheduled message of topic/);
      } finally {
        await producer.shutdown();
      }

      const consumer = new SimpleConsumer({ endpoints: brokers[1].grpc, namespace: '', consumerGroup: GROUP,
        subscriptions: new Map([[TOPIC, '*']]), awaitDuration: 1000, sessionCredentials, logger: quietLogger });
      await consumer.startup();
      const seen = new Set();
      try {
        const deadline = deliverAt + 40000;
        while (seen.size < kept.size && Date.now() < deadline) {
          for (const mv of await consumer.receive(16, 30000)) {
            const body = mv.body.toString();
            assert.ok(Date.now() >= deliverAt, `${body} arrived early`);
            seen.add(body);
            await consumer.ack(mv);
          }
        }
        // The recalled ones were due at the same time: one more receive per broker finds none.
        for (let i = 0; i < brokers.length; i++) {
          for (const mv of await consumer.receive(16, 30000)) seen.add(mv.body.toString());
        }
      } finally {
        await consumer.shutdown();
      }
      assert.deepEqual([...seen].sort(), [...kept].sort(), 'exactly the messages not recalled arrived');
    });
});
