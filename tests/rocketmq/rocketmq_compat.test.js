// RocketMQ 5 compatibility, round 2 (issue 22): what the official client's own tests expect
// (transaction id on every send, __SHARDINGKEY, RocketMQ's error texts, delivery order of a
// consumer group) and namespaces, checked with rocketmq-client-nodejs@1.0.8 against a broker
// started here. Run with tests/rocketmq/run.sh <build-dir> rocketmq_compat.test.js.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');
const { sleep, quietLogger, runCli, startInTempDir, teardown } = require('./test_helpers');

const NORMAL_TOPIC = 'cmp_normal';
const FIFO_TOPIC = 'cmp_fifo';
const ORDER_TOPIC = 'cmp_fifo_order';  // FIFO, read only by the delivery-order case

let broker;
let dataDir;
let nativeAddr;
let endpoints;

async function cli(...args) {
  return runCli(nativeAddr, args);
}

before(async () => {
  // cmp_g_renew retries at once: without the broker's renewal its slow message would come back
  // while the listener still runs. PushConsumer leases of 4 s, renewed by the broker up to 60 s
  // after the receive.
  const prefix = 'tokimq-rmq-compat-';
  ({ dataDir, broker, nativeAddr, endpoints } = await startInTempDir(prefix, 'broker', {
    toml: 'max_long_poll = "5s"\nmax_message_size = 65536\n[group.cmp_g_renew]\nbackoff = [0]\n',
    args: ['--grpc-push-lease', '4s', '--grpc-auto-renew-max', '60s'],
  }));
  await cli('topic', 'create', '--name', NORMAL_TOPIC, '--type', 'normal', '--queues', '2');
  await cli('topic', 'create', '--name', FIFO_TOPIC, '--type', 'fifo', '--queues', '2');
  await cli('topic', 'create', '--name', ORDER_TOPIC, '--type', 'fifo', '--queues', '2');
});

after(() => teardown(dataDir, [broker]));

// Receives until `n` messages arrived or `ms` passed; acks each unless `ack` is false.
async function receiveN(consumer, n, ms, { ack = true, invisibleMs = 10000 } = {}) {
  const out = [];
  const deadline = Date.now() + ms;
  while (out.length < n && Date.now() < deadline) {
    for (const mv of await consumer.receive(16, invisibleMs)) {
      out.push(mv);
      if (ack) await consumer.ack(mv);
    }
  }
  return out;
}

describe('RocketMQ 5 compatibility round 2', () => {
  it('every send answers transactionId = messageId (item 1)', async () => {
    const producer = new Producer({ endpoints, namespace: '', topics: [NORMAL_TOPIC], logger: quietLogger });
    await producer.startup();
    try {
      const r = await producer.send({ topic: NORMAL_TOPIC, body: Buffer.from('tx-id'), tag: 't' });
      assert.ok(r.messageId);
      assert.equal(r.transactionId, r.messageId);
    } finally {
      await producer.shutdown();
    }
  });

  it('received FIFO messages carry __SHARDINGKEY = their message group (item 3)', async () => {
    await cli('group', 'create', '--name', 'cmp_g_shard', '--orderly');
    const producer = new Producer({ endpoints, namespace: '', topics: [FIFO_TOPIC], logger: quietLogger });
    await producer.startup();
    const consumer = new SimpleConsumer({
      endpoints, namespace: '', consumerGroup: 'cmp_g_shard', logger: quietLogger,
      subscriptions: new Map([[FIFO_TOPIC, '*']]), awaitDuration: 1000,
    });
    await consumer.startup();
    try {
      await producer.send({ topic: FIFO_TOPIC, body: Buffer.from('s0'), messageGroup: 'order-42',
        properties: new Map([['p', 'v']]) });
      const got = await receiveN(consumer, 1, 10000);
      assert.equal(got.length, 1);
      assert.equal(got[0].messageGroup, 'order-42');
      assert.equal(got[0].properties.get('__SHARDINGKEY'), 'order-42');
      assert.equal(got[0].properties.get('p'), 'v');
    } finally {
      await consumer.shutdown();
      await producer.shutdown();
    }
  });

  it('refusals carry RocketMQ\'s error texts (item 4)', async () => {
    const producer = new Producer({ endpoints, namespace: '', topics: [NORMAL_TOPIC], logger: quietLogger });
    await producer.startup();
    const consumer = new SimpleConsumer({
      endpoints, namespace: '', consumerGroup: 'cmp_g_texts', logger: quietLogger,
      subscriptions: new Map([[NORMAL_TOPIC, '*']]), awaitDuration: 1000,
    });
    await consumer.startup();
    try {
      await assert.rejects(producer.send({ topic: 'cmp_missing', body: Buffer.from('x') }), (err) => {
        assert.equal(err.code, 40402);  // TOPIC_NOT_FOUND
        assert.match(err.message, /No topic route info in name server for the topic: cmp_missing/);
        return true;
      });
      await assert.rejects(consumer.receive(1, 13 * 3600 * 1000), (err) => {
        assert.equal(err.code, 40011);  // ILLEGAL_INVISIBLE_TIME
        assert.match(err.message, /the invisibleTime is too large\. max is 43200000/);
        return true;
      });
    } finally {
      await consumer.shutdown();
      await producer.shutdown();
    }
  });

  it('delivery order belongs to the consumer group: concurrently unless created orderly (item 2)',
    { timeout: 60000 }, async () => {
      await cli('group', 'create', '--name', 'cmp_g_orderly', '--orderly');
      const producer = new Producer({ endpoints, namespace: '', topics: [ORDER_TOPIC], logger: quietLogger });
      await producer.startup();
      const plain = new SimpleConsumer({
        endpoints, namespace: '', consumerGroup: 'cmp_g_plain', logger: quietLogger,
        subscriptions: new Map([[ORDER_TOPIC, '*']]), awaitDuration: 1000,
      });
      const orderly = new SimpleConsumer({
        endpoints, namespace: '', consumerGroup: 'cmp_g_orderly', logger: quietLogger,
        subscriptions: new Map([[ORDER_TOPIC, '*']]), awaitDuration: 1000,
      });
      await plain.startup();
      await orderly.startup();
      try {
        // Two messages of one message group (the official client's FIFO test).
        await producer.send({ topic: ORDER_TOPIC, body: Buffer.from('o0'), messageGroup: 'og' });
        await producer.send({ topic: ORDER_TOPIC, body: Buffer.from('o1'), messageGroup: 'og' });
        // A group never configured (Concurrently, RocketMQ's default): the second message comes
        // while the first is still leased (never acked here).
        const both = await receiveN(plain, 2, 10000, { ack: false, invisibleMs: 30000 });
        assert.deepEqual(both.map((m) => m.body.toString()).sort(), ['o0', 'o1']);
        // An orderly group: only the head of the message group while it is leased.
        const head = await receiveN(orderly, 2, 4000, { ack: false, invisibleMs: 30000 });
        assert.deepEqual(head.map((m) => m.body.toString()), ['o0']);
        await orderly.ack(head[0]);
        const next = await receiveN(orderly, 1, 10000, { ack: true });
        assert.deepEqual(next.map((m) => m.body.toString()), ['o1']);
        for (const m of both) await plain.ack(m);
      } finally {
        await orderly.shutdown();
        await plain.shutdown();
        await producer.shutdown();
      }
      const stats = await cli('stats');
      assert.match(stats, /cmp_g_orderly\s+in_flight=0\b.* order=orderly/);
      assert.match(stats, /cmp_g_plain\s+in_flight=0\b.* order=unset/);

      // The settings answer's `fifo` is the group's order: a PushConsumer picks its consume
      // service from it.
      for (const [group, service] of [['cmp_g_orderly', 'FifoConsumeService'],
        ['cmp_g_plain', 'StandardConsumeService']]) {
        const push = new PushConsumer({
          endpoints, namespace: '', consumerGroup: group, logger: quietLogger,
          subscriptions: new Map([[ORDER_TOPIC, '*']]),
          messageListener: { consume() { return ConsumeResult.SUCCESS; } },
        });
        await push.startup();
        try {
          assert.equal(push.getConsumeService().constructor.name, service, group);
        } finally {
          await push.shutdown();
        }
      }
      // A group gets a configuration by create; update changes it, and needs one.
      await assert.rejects(cli('group', 'update', '--name', 'cmp_g_plain', '--orderly'),
        /subscription group \[cmp_g_plain\] does not exist/);
      assert.match(await cli('group', 'create', '--name', 'cmp_g_plain'), /order=concurrently/);
      await cli('group', 'update', '--name', 'cmp_g_plain', '--orderly');
      assert.match(await cli('group', 'describe', 'cmp_g_plain'), /order=orderly/);
      assert.match(await cli('stats'), /cmp_g_plain\s+in_flight=0\b.* order=orderly/);
    });

  it('the broker renews a PushConsumer\'s lease while its listener runs (item 7)',
    { timeout: 60000 }, async () => {
      const producer = new Producer({ endpoints, namespace: '', topics: [NORMAL_TOPIC], logger: quietLogger });
      await producer.startup();
      const calls = [];
      let done;
      const finished = new Promise((r) => { done = r; });
      const push = new PushConsumer({
        endpoints, namespace: '', consumerGroup: 'cmp_g_renew', logger: quietLogger,
        subscriptions: new Map([[NORMAL_TOPIC, 'slow']]),
        messageListener: {
          async consume(mv) {
            calls.push({ body: mv.body.toString(), attempt: mv.deliveryAttempt });
            await sleep(10000);  // 2.5 leases of 4 s
            done();
            return ConsumeResult.SUCCESS;
          },
        },
      });
      await push.startup();
      try {
        await producer.send({ topic: NORMAL_TOPIC, body: Buffer.from('slow-1'), tag: 'slow' });
        await Promise.race([finished, sleep(30000)]);
        await sleep(6000);  // a lease that ran out would have handed it out again by now
        assert.deepEqual(calls, [{ body: 'slow-1', attempt: 1 }]);
      } finally {
        await push.shutdown();
        await producer.shutdown();
      }
      const stats = await cli('stats');
      assert.match(stats, /cmp_g_renew\s+in_flight=0\b/);
    });
});
