// The official RocketMQ 5 Node.js client against a tokimq broker started with --auth (issue 17):
// sessionCredentials right / wrong / missing / without permission, users and rules set up with
// the native `tokimq` CLI. Run with tests/rocketmq/run.sh <build-dir> rocketmq_auth.test.js.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const {
  quietLogger, runCli, startBroker, startInTempDir, teardown, codeOf,
} = require('./test_helpers');

const TOPIC = 'rmq_auth';
const GROUP = 'g_auth';
const UNAUTHORIZED = 40100;
const FORBIDDEN = 40300;

let broker;
let dataDir;
let nativeAddr;
let endpoints;

async function cli(...args) {
  const env = { ...process.env, TOKIMQ_ACCESS_KEY: 'root', TOKIMQ_SECRET_KEY: 'root-secret' };
  return runCli(nativeAddr, args, { env });
}

let tlsBroker;

before(async () => {
  ({ dataDir, broker, nativeAddr, endpoints } = await startInTempDir('tokimq-rmq-auth-', 'auth', {
    toml: 'max_long_poll = "5s"\nauth = true\nauth_init_user = "root:root-secret"\n',
  }));
  await cli('topic', 'create', '--name', TOPIC, '--type', 'normal', '--queues', '2');
  await cli('user', 'create', '--access-key', 'app', '--secret-key', 'app-secret');
  await cli('user', 'create', '--access-key', 'nobody', '--secret-key', 'nobody-secret');
  await cli('acl', 'grant', '--user', 'app', '--resource', `topic:${TOPIC}`, '--actions', 'pub,sub');
  await cli('acl', 'grant', '--user', 'app', '--resource', `group:${GROUP}`, '--actions', 'sub');
});

after(() => teardown(dataDir, [broker, tlsBroker]));

describe('RocketMQ 5 clients against tokimq --auth', { concurrency: true }, () => {
  it('right credentials with permission: send, receive, ack', { timeout: 60000 }, async () => {
    const sessionCredentials = { accessKey: 'app', accessSecret: 'app-secret' };
    const producer = new Producer({ endpoints, namespace: '', topics: [TOPIC], sessionCredentials, logger: quietLogger });
    await producer.startup();
    const consumer = new SimpleConsumer({
      endpoints, namespace: '', consumerGroup: GROUP, sessionCredentials, logger: quietLogger,
      subscriptions: new Map([[TOPIC, '*']]), awaitDuration: 2000,
    });
    await consumer.startup();
    try {
      for (let i = 0; i < 3; i++) {
        const r = await producer.send({ topic: TOPIC, body: Buffer.from(`auth-${i}`) });
        assert.ok(r.messageId);
      }
      const got = new Set();
      for (let round = 0; round < 20 && got.size < 3; round++) {
        for (const m of await consumer.receive(16, 15000)) {
          got.add(m.body.toString());
          await consumer.ack(m);
        }
      }
      assert.deepEqual([...got].sort(), ['auth-0', 'auth-1', 'auth-2']);
    } finally {
      await consumer.shutdown();
      await producer.shutdown();
    }
  });

  it('wrong secret: UNAUTHORIZED', { timeout: 30000 }, async () => {
    const producer = new Producer({ endpoints, namespace: '', topics: [TOPIC], logger: quietLogger,
      sessionCredentials: { accessKey: 'app', accessSecret: 'not-the-secret' } });
    await assert.rejects(producer.startup(), (err) => codeOf(err) === UNAUTHORIZED);
  });

  it('no credentials: UNAUTHORIZED', { timeout: 30000 }, async () => {
    const producer = new Producer({ endpoints, namespace: '', topics: [TOPIC], logger: quietLogger });
    await assert.rejects(producer.startup(), (err) => codeOf(err) === UNAUTHORIZED);
  });

  it('authenticated without permission: FORBIDDEN', { timeout: 30000 }, async () => {
    const producer = new Producer({ endpoints, namespace: '', topics: [TOPIC], logger: quietLogger,
      sessionCredentials: { accessKey: 'nobody', accessSecret: 'nobody-secret' } });
    await assert.rejects(producer.startup(), (err) => codeOf(err) === FORBIDDEN);
    // app may read the topic but not as another group.
    const consumer = new SimpleConsumer({
      endpoints, namespace: '', consumerGroup: 'g_other', logger: quietLogger,
      sessionCredentials: { accessKey: 'app', accessSecret: 'app-secret' },
      subscriptions: new Map([[TOPIC, '*']]), awaitDuration: 1000,
    });
    await consumer.startup();
    try {
      await assert.rejects(consumer.receive(1, 10000), (err) => codeOf(err) === FORBIDDEN);
    } finally {
      await consumer.shutdown();
    }
  });
});

// TLS: certificates made by run.sh with openssl (TOKIMQ_TEST_TLS_DIR); the client trusts
// the test CA through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, set before grpc-js loaded.
describe('RocketMQ 5 clients against tokimq --tls-mode enforcing', () => {
  it('sslEnabled producer and consumer work; plaintext is refused', { timeout: 60000 }, async () => {
    const tlsDir = process.env.TOKIMQ_TEST_TLS_DIR;
    assert.ok(tlsDir && process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, 'run through tests/rocketmq/run.sh');
    const b = await startBroker(path.join(dataDir, 'tls'), {
      toml: 'max_long_poll = "5s"\n',
      args: ['--tls-cert', path.join(tlsDir, 'server.pem'), '--tls-key', path.join(tlsDir, 'server.key'),
        '--tls-mode', 'enforcing'],
    });
    tlsBroker = b;
    await runCli(b.nativeAddr, ['--tls', '--tls-ca', path.join(tlsDir, 'ca.pem'), 'topic', 'create',
      '--name', 'rmq_tls']);
    const producer = new Producer({ endpoints: b.endpoints, namespace: '', topics: ['rmq_tls'],
      sslEnabled: true, logger: quietLogger });
    await producer.startup();
    const consumer = new SimpleConsumer({
      endpoints: b.endpoints, namespace: '', consumerGroup: 'g_tls', sslEnabled: true,
      logger: quietLogger, subscriptions: new Map([['rmq_tls', '*']]), awaitDuration: 2000,
    });
    await consumer.startup();
    try {
      await producer.send({ topic: 'rmq_tls', body: Buffer.from('over-tls') });
      let got = [];
      for (let round = 0; round < 10 && got.length === 0; round++) got = await consumer.receive(1, 15000);
      assert.equal(got.length, 1);
      assert.equal(got[0].body.toString(), 'over-tls');
      await consumer.ack(got[0]);
    } finally {
      await consumer.shutdown();
      await producer.shutdown();
    }
    const plain = new Producer({ endpoints: b.endpoints, namespace: '', topics: ['rmq_tls'], logger: quietLogger });
    await assert.rejects(plain.startup());
  });
});
