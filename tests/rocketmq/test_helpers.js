// Shared by the Node.js tests of tests/rocketmq (rocketmq_clients.test.js, rocketmq_auth.test.js):
// the binaries' dir, a quiet logger for the official client, a free port, the native CLI.
'use strict';
const { execFile } = require('node:child_process');
const net = require('node:net');
const path = require('node:path');
const { promisify } = require('node:util');

const execFileP = promisify(execFile);
// tokimq-broker and tokimq, set by run.sh / run_auth.sh.
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

module.exports = { BIN, sleep, quietLogger, freePort, runCli };
