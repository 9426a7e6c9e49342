// The official RocketMQ 5 Node.js client against a tokimq broker started with --auth (issue 17):
// sessionCredentials right / wrong / missing / without permission, users and rules set up with
// the native `tokimq` CLI. Run with tests/rocketmq/run_auth.sh <build-dir>.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const execFileP = promisify(execFile);
const BIN = process.env.TOKIMQ_BIN_DIR;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quietLogger = {
  info() {}, debug() {}, warn() {},
  error(...args) { if (process.env.RMQ_TEST_VERBOSE) console.error(...args); },
};
const TOPIC = 'rmq_auth';
const GROUP = 'g_auth';
const UNAUTHORIZED = 40100;
const FORBIDDEN = 40300;

let broker;
let dataDir;
let nativeAddr;
let endpoints;

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function cli(...args) {
  const env = { ...process.env, TOKIMQ_ACCESS_KEY: 'root', TOKIMQ_SECRET_KEY: 'root-secret' };
  const { stdout } = await execFileP(path.join(BIN, 'tokimq'), ['--broker', nativeAddr, ...args], { env });
  return stdout;
}

// The code of a failed call: the client's own exception, or the cause of a failed startup().
function codeOf(err) {
  for (let e = err; e; e = e.cause) {
    if (typeof e.code === 'number') return e.code;
  }
  return undefined;
}

before(async () => {
  assert.ok(BIN, 'TOKIMQ_BIN_DIR must point at the build bin/ dir');
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tokimq-rmq-auth-'));
  const grpcPort = await freePort();
  const portFile = path.join(dataDir, 'port');
  const config = path.join(dataDir, 'broker.toml');
  fs.writeFileSync(config, 'max_long_poll = "5s"\nauth = true\nauth_init_user = "root:root-secret"\n');
  broker = spawn(path.join(BIN, 'tokimq-broker'), [
    '--config', config, '--data-dir', path.join(dataDir, 'data'), '--port', '0', '--port-file', portFile,
    '--grpc-port', String(grpcPort), '--log-file', path.join(dataDir, 'broker.log'),
  ], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((resolve) => broker.once('exit', resolve));
  for (let i = 0; i < 200 && !fs.existsSync(portFile); i++) {
    if (broker.exitCode !== null) break;
    await Promise.race([sleep(50), exited]);
  }
  assert.ok(fs.existsSync(portFile), `broker did not start (log: ${dataDir}/broker.log)`);
  nativeAddr = `127.0.0.1:${fs.readFileSync(portFile, 'utf8').trim()}`;
  endpoints = `127.0.0.1:${grpcPort}`;
  await cli('topic', 'create', '--name', TOPIC, '--type', 'normal', '--queues', '2');
  await cli('user', 'create', '--access-key', 'app', '--secret-key', 'app-secret');
  await cli('user', 'create', '--access-key', 'nobody', '--secret-key', 'nobody-secret');
  await cli('acl', 'grant', '--user', 'app', '--resource', `topic:${TOPIC}`, '--actions', 'pub,sub');
  await cli('acl', 'grant', '--user', 'app', '--resource', `group:${GROUP}`, '--actions', 'sub');
});

after(async () => {
  if (broker && broker.exitCode === null) {
    const done = new Promise((resolve) => broker.once('exit', resolve));
    broker.kill('SIGTERM');
    await done;
    assert.equal(broker.exitCode, 0, `broker exit code (log: ${dataDir}/broker.log)`);
  }
  if (dataDir && !process.env.RMQ_TEST_KEEP) fs.rmSync(dataDir, { recursive: true, force: true });
  setTimeout(() => process.exit(process.exitCode ?? 0), 3000).unref();
});

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
