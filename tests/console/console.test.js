// The web console in headless Chromium (puppeteer-core, Debian chromium) against a tokimq broker
// with known traffic made by the native CLI: the numbers the page shows equal `tokimq stats`,
// the timer charts put the delayed sends in their minute and hour, a DLQ message resent from
// the page is consumed by the CLI; a screenshot is saved and the load time printed.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const puppeteer = require('puppeteer-core');
const { BIN, sleep, freePort, runCli } = require('../rocketmq/test_helpers.js');

let broker, dataDir, nativeAddr, httpPort;
const cli = (...args) => runCli(nativeAddr, args);
// `tokimq send` of one message per line of `lines` (stdin), with extra args.
function sendLines(lines, ...args) {
  const r = spawnSync(path.join(BIN, 'tokimq'), ['--broker', nativeAddr, 'send', '--quiet', ...args],
    { input: lines.join('\n') + '\n', encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

before(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tokimq-console-'));
  httpPort = await freePort();
  const portFile = path.join(dataDir, 'port');
  const config = path.join(dataDir, 'broker.toml');
  fs.writeFileSync(config, '[group.billing]\nmax_attempts = 1\n');  // a nack dead-letters at once
  broker = spawn(path.join(BIN, 'tokimq-broker'), [
    '--config', config, '--data-dir', path.join(dataDir, 'data'), '--port', '0', '--port-file', portFile,
    '--grpc-port', '0', '--http-port', String(httpPort), '--log-file', path.join(dataDir, 'broker.log'),
  ], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((resolve) => broker.once('exit', resolve));
  for (let i = 0; i < 200 && !fs.existsSync(portFile); i++) {
    if (broker.exitCode !== null) break;
    await Promise.race([sleep(50), exited]);
  }
  assert.ok(fs.existsSync(portFile), `broker did not start (log: ${dataDir}/broker.log)`);
  nativeAddr = `127.0.0.1:${fs.readFileSync(portFile, 'utf8').trim()}`;

  // Known traffic: 12 orders, 1 of them dead-lettered by billing and 1 in flight; 7 delayed
  // sends: 4 due in 90 s (minute 1), 3 in 2 h 30 min (hour 2).
  await cli('topic', 'create', '--name', 'orders', '--type', 'normal', '--queues', '4');
  await cli('topic', 'create', '--name', 'reminders', '--type', 'delay', '--queues', '2', '--max-delay', '7d');
  sendLines(Array.from({ length: 12 }, (_, i) => `order-${i}`), '--topic', 'orders', '--key', 'ord');
  sendLines(['r1', 'r2', 'r3', 'r4'], '--topic', 'reminders', '--delay', '90s');
  sendLines(['l1', 'l2', 'l3'], '--topic', 'reminders', '--delay', '150m');
  const got = (await cli('consume', '--group', 'billing', '--topic', 'orders', '--count', '2',
    '--invisible', '10m')).trim().split('\n');
  assert.equal(got.length, 2);
  const handle = got[0].match(/handle=(\S+)/)[1];
  await cli('nack', '--group', 'billing', handle);
});

after(async () => {
  if (broker && broker.exitCode === null) {
    const done = new Promise((resolve) => broker.once('exit', resolve));
    broker.kill('SIGTERM');
    await done;
  }
  if (dataDir && !process.env.CONSOLE_TEST_KEEP) fs.rmSync(dataDir, { recursive: true, force: true });
});

// `tokimq stats` figures: topic depths, group gauges, timer pending.
async function cliStats() {
  const out = await cli('stats');
  const depth = {}, groups = {};
  for (const m of out.matchAll(/^ {2}(\S+)\s+\S+\s+depth=(\d+)$/gm)) depth[m[1]] = Number(m[2]);
  for (const m of out.matchAll(/^ {2}(\S+)\s+in_flight=(\d+) parked=(\d+) dlq_depth=(\d+)/gm)) {
    groups[m[1]] = { inFlight: Number(m[2]), dlq: Number(m[4]) };
  }
  return { depth, groups, pending: Number(out.match(/timer: pending=(\d+)/)[1]), text: out };
}

test('the console shows the broker\'s figures and resends a DLQ message', { timeout: 120000 }, async () => {
  const browser = await puppeteer.launch({
    executablePath: process.env.TOKIMQ_CHROMIUM, headless: true,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1800 });
    const t0 = Date.now();
    await page.goto(`http://127.0.0.1:${httpPort}/`, { waitUntil: 'load' });
    const loadMs = Date.now() - t0;
    await page.waitForSelector('body[data-loaded="1"]', { timeout: 15000 });
    const dataMs = Date.now() - t0;
    const weight = await page.evaluate(() => performance.getEntriesByType('resource')
      .concat(performance.getEntriesByType('navigation'))
      .filter((e) => !e.name.includes('/api/'))
      .reduce((s, e) => s + e.transferSize, 0));
    console.log(`console load: page ${loadMs} ms, first data drawn ${dataMs} ms, page weight ${weight} bytes`);

    // Wait for the timer to have enqueued the 7 delayed sends (the page refreshes every 2 s).
    await page.waitForFunction(() => document.getElementById('tm-pending')?.textContent === '7', { timeout: 20000 });
    const st = await cliStats();
    const shown = await page.evaluate(() => {
      const cell = (sel) => document.querySelector(sel)?.textContent;
      return {
        orders: cell('tr[data-topic="orders"] .depth'),
        reminders: cell('tr[data-topic="reminders"] .depth'),
        inFlight: cell('tr[data-group="billing"] .inflight'),
        lag: cell('tr[data-group="billing"] .lag'),
        sent: cell('tr[data-topic="orders"] .sent'),
        dlq: cell('tr[data-group="billing"] .dlq'),
        pending: cell('#tm-pending'),
        ovPending: cell('#ov-pending'),
        ovDlq: cell('#ov-dlq'),
        minute1: document.querySelector('#chart-minutes rect[data-i="1"]')?.dataset.v,
        hour2: document.querySelector('#chart-hours rect[data-i="2"]')?.dataset.v,
      };
    });
    assert.equal(shown.orders, String(st.depth.orders), st.text);
    assert.equal(shown.reminders, String(st.depth.reminders), st.text);
    assert.equal(shown.inFlight, String(st.groups.billing.inFlight), st.text);
    assert.equal(shown.dlq, String(st.groups.billing.dlq), st.text);
    assert.equal(shown.pending, String(st.pending), st.text);
    assert.equal(shown.ovPending, String(st.pending));
    assert.equal(shown.ovDlq, String(st.groups.billing.dlq));
    // And the figures are the known traffic, not only equal.
    assert.deepEqual([st.depth.orders, st.groups.billing.inFlight, st.groups.billing.dlq, st.pending], [12, 1, 1, 7]);
    // Lag is not printed by `tokimq stats`: against /metrics, which reads the same Stats answer.
    const metrics = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    const lag = metrics.match(/^tokimq_consumer_lag_messages\{group="billing",topic="orders"\} (\d+)/m);
    assert.ok(lag, metrics);
    assert.equal(shown.lag, lag[1]);
    assert.equal(shown.lag, '10');  // 12 sent, 2 handed out
    assert.equal(shown.sent, '12');
    assert.equal(shown.minute1, '4');
    assert.equal(shown.hour2, '3');

    // The DLQ browser lists the dead-lettered order; resend it and consume it with the CLI.
    await page.waitForSelector('#dlq-rows button.resend');
    const body = await page.$eval('#dlq-rows tr pre', (e) => e.textContent);
    assert.match(body, /^order-\d+$/);
    await page.screenshot({ path: process.env.TOKIMQ_SCREENSHOT, fullPage: true });
    await page.click('#dlq-rows button.resend');
    await page.waitForSelector('#dlq-rows .result.ok', { timeout: 10000 });
    const result = await page.$eval('#dlq-rows .result', (e) => e.textContent);
    const resentId = result.match(/as (\S+)$/)[1];
    // The CLI consumes billing's backlog (acking) until the resent message comes; a receive may
    // answer with fewer messages than are ready, so consume again until it shows up.
    let consumed = '', line;
    for (let i = 0; i < 20 && !line; i++) {
      consumed += await cli('consume', '--group', 'billing', '--topic', 'orders', '--ack', '--wait', '1s');
      line = consumed.split('\n').find((l) => l.startsWith(resentId + ' '));
    }
    assert.ok(line, `resent ${resentId} not consumed:\n${consumed}`);
    assert.ok(line.endsWith('\t' + body), line);
    console.log(`screenshot: ${process.env.TOKIMQ_SCREENSHOT}`);
  } finally {
    await browser.close();
  }
});
