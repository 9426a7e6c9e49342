// Shared by the Node.js tests of tests/rocketmq (*.test.js, run by run.sh): the binaries' dir, a
// quiet logger for the official client, a free port, the native CLI, starting and stopping a
// broker (alone or in a test file's temp dir), the status code of a failed call.
'use strict';
const assert = require('node:assert/strict');
const { execFile, spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');

const execFileP = promisify(execFile);
// tokimq-broker and tokimq, set by run.sh.
const BIN = process.env.TOKIMQ_BIN_DIR;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// The official client logs every retry; RMQ_TEST_VERBOSE=1 shows its errors.
const quietLogger = {
  info() {}, debug() {}, warn() {},
  error(...args) { if (process.env.RMQ_TEST_VERBOSE) console.error(...args); },
};

// A TCP port free on 127.0.0.1 at the time of the call.
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

// Runs `tokimq --broker <nativeAddr> args...` and returns its stdout (rejects on exit code != 0).
async function runCli(nativeAddr, args, options = {}) {
  const { stdout } = await execFileP(path.join(BIN, 'tokimq'), ['--broker', nativeAddr, ...args],
    { maxBuffer: 64 << 20, ...options });
  return stdout;
}

// Starts tokimq-broker with its data, config, log and port file under `dir` (created): native
// port chosen by the broker (--port 0), gRPC on a free port, HTTP off, `toml` as its config file
// and `args` appended to its flags. Resolves { proc, dir, nativeAddr, endpoints } once the broker
// listens; fails the test (naming its log) when it exits or is not up within 10 s.
async function startBroker(dir, { toml = '', args = [] } = {}) {
  fs.mkdirSync(dir, { recursive: true });
  const grpcPort = await freePort();
  const portFile = path.join(dir, 'port');
  const config = path.join(dir, 'broker.toml');
  fs.writeFileSync(config, toml);
  const proc = spawn(path.join(BIN, 'tokimq-broker'), [
    '--config', config, '--data-dir', path.join(dir, 'data'), '--port', '0', '--port-file', portFile,
    '--grpc-port', String(grpcPort), '--http-port', '0', '--log-file', path.join(dir, 'broker.log'),
    ...args,
  ], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  for (let i = 0; i < 200 && !fs.existsSync(portFile); i++) {
    if (proc.exitCode !== null) break;
    await Promise.race([sleep(50), exited]);
  }
  assert.ok(fs.existsSync(portFile), `broker did not start (log: ${dir}/broker.log)`);
  return {
    proc, dir,
    nativeAddr: `127.0.0.1:${fs.readFileSync(portFile, 'utf8').trim()}`,
    endpoints: `127.0.0.1:${grpcPort}`,
  };
}

// Stops a broker started by startBroker (SIGTERM) and checks that it exited cleanly (code 0).
// A broker that already exited is only checked.
async function stopBroker(broker) {
  if (!broker) return;
  const { proc, dir } = broker;
  if (proc.exitCode === null && proc.signalCode === null) {
    const done = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    await done;
  }
  assert.equal(proc.exitCode, 0, `broker exit code (log: ${dir}/broker.log)`);
}

// A test file's `before`: makes a temp dir (os.tmpdir()/<prefix>XXXXXX) and starts a broker in
// its subdir `name` (startBroker with `options`). Resolves { dataDir, broker, nativeAddr,
// endpoints }; pair it with teardown(dataDir, [broker, ...]) in the file's `after`.
async function startInTempDir(prefix, name = 'broker', options = {}) {
  assert.ok(BIN, 'TOKIMQ_BIN_DIR must point at the build bin/ dir');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const broker = await startBroker(path.join(dataDir, name), options);
  return { dataDir, broker, nativeAddr: broker.nativeAddr, endpoints: broker.endpoints };
}

// A test file's `after`: stops `brokers` in order (stopBroker: each must exit with code 0;
// undefined ones are skipped), removes `dataDir` unless RMQ_TEST_KEEP is set, and ends the
// process 3 s later with its exit code: rocketmq-client-nodejs 1.0.8's PushConsumer leaves a
// timer armed after shutdown(), which would keep node alive forever.
async function teardown(dataDir, brokers) {
  for (const b of brokers) await stopBroker(b);
  if (dataDir && !process.env.RMQ_TEST_KEEP) fs.rmSync(dataDir, { recursive: true, force: true });
  setTimeout(() => process.exit(process.exitCode ?? 0), 3000).unref();
}

// The RocketMQ status code of a failed call: the client's own exception, or the cause of a
// failed startup() (the official client wraps it).
function codeOf(err) {
  for (let e = err; e; e = e.cause) {
    if (typeof e.code === 'number') return e.code;
  }
  return undefined;
}

module.exports = {
  BIN, sleep, quietLogger, freePort, runCli, startBroker, stopBroker, startInTempDir, teardown,
  codeOf,
};
