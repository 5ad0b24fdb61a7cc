// The /ui/ dashboard in headless Chromium against a live floodgate.
//
//   FLOODGATE_BIN=build/release/floodgate node --test tests/browser/dashboard.test.mjs
//
// Starts floodgate on a free loopback port with an admin token, sends
// traffic to /v1/check so one subject is denied most, takes leases of a
// concurrency rule and calls CL.THROTTLE, then drives the dashboard:
// locked until the token is entered, with nothing shown that only the
// token can tell (no "No alerts yet."); the top denied subject in the top
// list; the charts fed by the event stream, a concurrency rule's by its
// acquisitions, refusals and leases in flight; reset and block from the
// page (checked with /v1/check); the blocks list, with a network blocked
// from its form and another through the API, lifted from the list (checked
// with /v1/check); the simulate page's bound and rules as
// the server takes them, and a simulated log's summary; the theme
// toggle. No console errors, page errors or failed requests are allowed
// (but the 401s the page gets before it has the token). Screenshots at
// 1280x800 and 390x844, light and dark, go to FLOODGATE_ARTIFACTS
// (default build/artifacts/ of the source tree). Only 127.0.0.1 is used;
// only the processes started here are stopped.
//
// Needs Debian's chromium (/usr/bin/chromium, or CHROMIUM_BIN) and
// `npm ci` in this directory (scripts/setup.sh does both).

import { spawn } from 'node:child_process';
import net from 'node:net';
import { accessSync, constants, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import puppeteer from 'puppeteer-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SOURCE_DIR = process.env.FLOODGATE_SOURCE_DIR || path.resolve(HERE, '..', '..');
const BIN = process.env.FLOODGATE_BIN || path.join(SOURCE_DIR, 'build', 'release', 'floodgate');
const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const ARTIFACTS = path.resolve(process.env.FLOODGATE_ARTIFACTS ||
  path.join(SOURCE_DIR, 'build', 'artifacts'));
const TOKEN = 'browser-test-admin-token-0123456789';
const STEP_MS = 10000;

const CONFIG = `
admin: { token_env: FG_BROWSER_ADMIN_TOKEN }
rules:
  api: { algorithm: fixed_window, limits: [5/minute] }
  login: { algorithm: sliding_window, limits: [3/minute] }
  search: { algorithm: token_bucket, limits: [100/minute], burst: 5 }
  exports: { algorithm: concurrency, max_in_flight: 2, lease_ttl: 10m }
  jobs: { algorithm: fixed_window, limits: [10/minute], priorities: { batch: 40% } }
`;
// What the server takes as a simulated log: a connection's unparsed input
// (4 MiB) less the header bound (8 KiB), exactly.
const SIMULATE_MAX = '4,088 KiB';

// A promise that fails after `ms` with `what` in its message.
function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// One RESP command on a connection of its own; resolves with the raw reply.
function resp(port, ...args) {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ host: '127.0.0.1', port });
    let reply = '';
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(`*${args.length}\r\n` +
      args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')));
    sock.on('data', (chunk) => {
      reply += chunk;
      if (reply.endsWith('\r\n')) { sock.end(); resolve(reply); }
    });
    sock.on('error', reject);
  });
}

// Starts floodgate; resolves with the process and its HTTP and RESP ports
// once it logs msg=listening.
function startFloodgate(configPath) {
  const proc = spawn(BIN, ['serve', '--config', configPath, '--http', '127.0.0.1:0',
    '--resp', '127.0.0.1:0', '--grpc', 'off', '--threads', '2'], {
    env: { ...process.env, FG_BROWSER_ADMIN_TOKEN: TOKEN },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const listening = new Promise((resolve, reject) => {
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      log += chunk;
      const http = /msg=listening .*\bhttp=127\.0\.0\.1:(\d+)/.exec(log);
      const resp = /msg=listening .*\bresp=127\.0\.0\.1:(\d+)/.exec(log);
      if (http && resp) resolve({ http: Number(http[1]), resp: Number(resp[1]) });
    });
    proc.on('exit', (code) => reject(new Error(`floodgate exited (${code}):\n${log}`)));
    proc.on('error', reject);
  });
  return { proc, listening, log: () => log };
}

describe('dashboard', { timeout: 75000 }, () => {
  let tmp, server, port, base, browser, page;
  const problems = [];       // what must not happen
  let unlocked = false;      // the token has been entered
  let watching = true;       // stop listening before the browser closes

  async function check(key, rule = 'api') {
    const res = await fetch(`${base}/v1/check`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ rule, key }),
    });
    return { status: res.status, body: await res.json() };
  }

  before(async () => {
    for (const [what, file] of [['floodgate (FLOODGATE_BIN)', BIN], ['chromium', CHROMIUM]]) {
      try {
        accessSync(file, constants.X_OK);
      } catch {
        throw new Error(`${what} is not executable at ${file} ` +
          '(scripts/setup.sh installs chromium)');
      }
    }
    tmp = mkdtempSync(path.join(tmpdir(), 'floodgate-browser-'));
    mkdirSync(ARTIFACTS, { recursive: true });
    const configPath = path.join(tmp, 'floodgate.yaml');
    writeFileSync(configPath, CONFIG);
    server = startFloodgate(configPath);
    const ports = await within(STEP_MS, 'floodgate start', server.listening);
    port = ports.http;
    base = `http://127.0.0.1:${port}`;

    // Traffic: mallory is denied most, bob a little, alice never.
    const sends = [];
    for (let i = 0; i < 30; i++) sends.push(['user:mallory', 'api']);
    for (let i = 0; i < 7; i++) sends.push(['user:bob', 'api']);
    for (let i = 0; i < 3; i++) sends.push(['user:alice', 'api']);
    for (let i = 0; i < 6; i++) sends.push(['ip:192.0.2.7', 'login']);
    for (let i = 0; i < 12; i++) sends.push(['q:42', 'search']);
    for (const [key, rule] of sends) await check(key, rule);
    // exports: two leases of job:1 granted and held, the third refused.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/v1/leases`, { method: 'POST',
        body: JSON.stringify({ rule: 'exports', key: 'job:1' }) });
      assert.equal(res.status, i < 2 ? 200 : 429);
      await res.text();
    }
    // jobs: a batch flood takes its 6 of 10 (2 refused), then the default
    // class its 4 more.
    for (let i = 0; i < 8; i++) await resp(ports.resp, 'FG.CHECK', 'jobs', 'j', 'PRIORITY', 'batch');
    for (let i = 0; i < 4; i++) await resp(ports.resp, 'FG.CHECK', 'jobs', 'j');
    // CL.THROTTLE is counted (and charted) but is no rule to simulate.
    assert.match(await resp(ports.resp, 'CL.THROTTLE', 'k', 1, 1, 60), /^\*5\r\n:0\r\n/);

    browser = await within(STEP_MS, 'chromium start', puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      userDataDir: path.join(tmp, 'chromium-profile'),
      args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic',
        '--no-first-run', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--disable-dev-shm-usage'],
    }));
    page = await browser.newPage();
    page.setDefaultTimeout(STEP_MS);
    await page.setViewport({ width: 1280, height: 800 });
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
    page.on('console', (msg) => {
      if (!watching || msg.type() !== 'error') return;
      // Before the token, the admin routes answer 401 and Chromium logs it.
      if (!unlocked && /status of 401/.test(msg.text())) return;
      problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => {
      if (watching) problems.push(`page error: ${err.message}`);
    });
    page.on('requestfailed', (req) => {
      if (watching) problems.push(`request failed: ${req.url()} ${req.failure()?.errorText}`);
    });
    page.on('response', (res) => {
      if (!watching || res.status() < 400) return;
      if (!unlocked && res.status() === 401) return;
      problems.push(`HTTP ${res.status()} for ${res.request().method()} ${res.url()}`);
    });
    page.on('request', (req) => {
      const url = new URL(req.url());
      if (watching && url.origin !== base && url.protocol !== 'data:') {
        problems.push(`request to another origin: ${req.url()}`);
      }
    });
  });

  after(async () => {
    watching = false;
    if (browser) await browser.close().catch(() => {});
    if (server && server.proc.exitCode === null) {
      const exited = new Promise((resolve) => server.proc.once('exit', resolve));
      server.proc.kill('SIGTERM');
      await within(5000, 'floodgate stop', exited).catch(() => server.proc.kill('SIGKILL'));
    }
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  test('without the token the page asks for it', async () => {
    await page.goto(`${base}/ui/`, { waitUntil: 'load' });
    await page.waitForFunction(
      () => !document.getElementById('notice').hidden &&
        /token/i.test(document.getElementById('notice').textContent));
    const live = await page.$eval('#live', (el) => el.dataset.state);
    assert.equal(live, 'locked');
    // The alerts are behind the token too: not "none", but "enter it".
    const alerts = await page.$eval('#alerts-empty', (el) => [el.hidden, el.textContent]);
    assert.equal(alerts[0], false);
    assert.match(alerts[1], /token/);
    assert.doesNotMatch(alerts[1], /No alerts/);
  });

  test('the admin token unlocks the top list; the most denied subject comes first', async () => {
    await page.type('#token', TOKEN);
    await page.click('#token-form button[type="submit"]');
    unlocked = true;
    await page.waitForFunction(() => document.getElementById('notice').hidden);
    await page.waitForFunction(
      () => document.getElementById('alerts-empty').textContent === 'No alerts yet.');
    await page.waitForSelector('#top-rule option[value="api"]');
    await page.select('#top-rule', 'api');
    await page.click('label[for="win-15m"]');
    const first =
      await page.waitForSelector('#top-body tr[data-rank="1"][data-key="user:mallory"]');
    const count = await first.$eval('td.num', (td) => td.textContent);
    assert.match(count, /^25\b/, 'mallory: 30 requests, 5 admitted, 25 denied');
    const keys = await page.$$eval('#top-body tr', (rows) => rows.map((r) => r.dataset.key));
    assert.deepEqual(keys.slice(0, 2), ['user:mallory', 'user:bob']);
    assert.ok(!keys.includes('user:alice'), 'alice was never denied');
    // The token stays in this tab's sessionStorage, not in localStorage.
    const stored = await page.evaluate(() => {
      const token = sessionStorage.getItem('floodgate.token');
      return [token, Object.keys(localStorage).filter((k) => localStorage.getItem(k) === token)];
    });
    assert.equal(stored[0], TOKEN);
    assert.deepEqual(stored[1], []);
  });

  test('the charts are fed by the event stream', async () => {
    const card = '.chart-card[data-rule="api"]';
    await page.waitForSelector(`${card}[data-updates]`);
    const before = await page.$eval(card, (el) => ({
      updates: Number(el.dataset.updates), denied: Number(el.dataset.denied),
      path: el.querySelector('.area-denied').getAttribute('d'),
    }));
    assert.ok(before.denied >= 27, `api's chart counts the denials (${before.denied})`);
    assert.ok(before.path.length > 0, 'the denied area is drawn');
    await page.waitForFunction(
      (sel, n) => Number(document.querySelector(sel).dataset.updates) >= n + 2, {}, card,
      before.updates);
    assert.equal(await page.$eval('#live', (el) => el.dataset.state), 'live');
    // Every configured rule has its chart, and CL.THROTTLE, which counted.
    const rules = await page.$$eval('.chart-card', (els) => els.map((e) => e.dataset.rule));
    assert.deepEqual(rules, ['CL.THROTTLE', 'api', 'exports', 'jobs', 'login', 'search']);
  });

  test('a concurrency rule shows its acquisitions, refusals and leases in flight', async () => {
    const card = '.chart-card[data-rule="exports"]';
    await page.waitForSelector(`${card}[data-kind="leases"][data-in-flight="2"]`);
    const totals = await page.$$eval(`${card} .chart-totals > span`,
      (els) => els.map((el) => el.textContent));
    assert.deepEqual(totals, ['2 acquired', '1 refused', '33.3 %', '2 in flight']);
    // Its top subjects, ranked in its words.
    await page.select('#top-rule', 'exports');
    await page.waitForFunction(
      () => document.querySelector('#top-by option[value="denied"]').textContent === 'refused');
    const row = await page.waitForSelector('#top-body tr[data-rank="1"][data-key="job:1"]');
    assert.match(await row.$eval('td.num', (td) => td.textContent), /^1\b/);
    await page.select('#top-by', 'admitted');
    await page.waitForFunction(() => {
      const td = document.querySelector('#top-body tr[data-key="job:1"] td.num');
      return td && /^2\b/.test(td.textContent);
    });
    await page.select('#top-by', 'denied');
    await page.select('#top-rule', 'api');
    await page.waitForSelector('#top-body tr[data-rank="1"][data-key="user:mallory"]');
  });

  test('the priority classes show their share and their decisions', async () => {
    await page.waitForSelector('#priorities-panel:not([hidden])');
    const rows = await page.$$eval('#priorities-body tr',
      (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert.deepEqual(rows, [['jobs', 'batch', '40 %', '6', '2'], ['jobs', 'default', '0 %', '4', '0']]);
  });

  test('reset and block from the subject panel', async () => {
    await page.click('#top-body tr[data-key="user:mallory"] button.inspect');
    await page.waitForFunction(
      () => document.getElementById('subject-key').textContent === 'user:mallory' &&
        document.querySelector('#subject-state .limits'));
    assert.equal(await page.$eval('#act-reset', (b) => b.disabled), false);

    await page.click('#act-reset');
    const result = (re) => page.waitForFunction(
      (source) => new RegExp(source).test(document.getElementById('action-result').textContent),
      {}, re.source);
    await result(/^Reset/);
    const afterReset = await check('user:mallory');
    assert.equal(afterReset.status, 200, 'reset: the next check is admitted');

    await page.select('#block-form select[name="ttl"]', '300000');
    await page.type('#block-form input[name="reason"]', 'browser test');
    await page.click('#act-block');
    await result(/^Blocked/);
    await page.waitForSelector('#subject-state .blocked');
    const afterBlock = await check('user:mallory');
    assert.equal(afterBlock.status, 429, 'blocked: the next check is denied');
    assert.equal(afterBlock.body.blocked, true);
    assert.equal(afterBlock.body.reason, 'browser test');
    // Only mallory, only on api.
    assert.equal((await check('user:carol')).status, 200);
    assert.equal((await check('user:mallory', 'login')).status, 200);
  });

  test('the blocks list shows key and network blocks; a network is blocked and lifted', async () => {
    // mallory's block, made in the subject panel, is listed by its key.
    const mallory = await page.waitForSelector(
      '#blocks-list li[data-key="user:mallory"][data-rule="api"]');
    assert.match(await mallory.evaluate((li) => li.textContent), /browser test/);

    // A network blocked from the form, on one rule.
    await page.type('#network-block-form input[name="network"]', '203.0.113.0/24');
    await page.select('#network-block-rule', 'api');
    await page.type('#network-block-form input[name="reason"]', 'browser network');
    await page.click('#act-block-network');
    await page.waitForFunction(() => /^Blocked 203\.0\.113\.0\/24 on api/.test(
      document.getElementById('blocks-result').textContent));
    const row = await page.waitForSelector('#blocks-list li[data-cidr="203.0.113.0/24"]');
    const shown = await row.evaluate((li) => [li.querySelector('.tag').textContent,
      li.querySelector('code').textContent, li.textContent]);
    assert.equal(shown[0], 'network');
    assert.equal(shown[1], '203.0.113.0/24', 'the network where a key shows');
    assert.match(shown[2], /on api, (1 h|59 min) left — browser network/);
    const inside = await check('203.0.113.9');
    assert.equal(inside.status, 429, 'an address inside the network is denied');
    assert.equal(inside.body.blocked, true);
    assert.equal(inside.body.reason, 'browser network');
    assert.equal((await check('203.0.114.9')).status, 200, 'outside it: admitted');
    assert.equal((await check('203.0.113.9', 'login')).status, 200, 'on api only');

    // One made through the API (IPv6) shows at the next refresh, and is
    // lifted from the list.
    const put = await fetch(`${base}/v1/admin/blocks/cidr/2001:db8::/32`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ ttl_ms: 600000, reason: 'v6 range' }),
    });
    assert.equal(put.status, 200);
    await put.text();
    assert.equal((await check('2001:db8::7', 'login')).status, 429);
    const v6 = await page.waitForSelector('#blocks-list li[data-cidr="2001:db8::/32"]');
    assert.match(await v6.evaluate((li) => li.textContent),
      /on every rule, (10 min|9 min \d+ s) left — v6 range/);
    await v6.$eval('button', (b) => b.click());
    await page.waitForFunction(() => /^Unblocked 2001:db8::\/32/.test(
      document.getElementById('blocks-result').textContent));
    await page.waitForFunction(
      () => !document.querySelector('#blocks-list li[data-cidr="2001:db8::/32"]'));
    assert.equal((await check('2001:db8::7', 'login')).status, 200, 'lifted');
    // The other network's block is still listed, and still in force.
    await page.waitForSelector('#blocks-list li[data-cidr="203.0.113.0/24"]');
    assert.equal((await check('203.0.113.10')).status, 429);
  });

  test('the simulate page summarises an uploaded log', async () => {
    // One window-aligned start: user:1 every second for two minutes (5
    // admitted per minute), user:2 every 20 s (always admitted).
    const start = 1_699_999_980_000;
    const lines = [];
    for (let s = 0; s < 120; s++) {
      lines.push(`${start + s * 1000},user:1`);
      if (s % 20 === 0) lines.push(`${start + s * 1000 + 1},user:2`);
    }
    const log = path.join(tmp, 'traffic.csv');
    writeFileSync(log, lines.join('\n') + '\n');
    await page.goto(`${base}/ui/#/simulate`);
    await page.waitForSelector('#view-simulate:not([hidden])');
    await page.waitForSelector('#sim-rule option[value="api"]');
    // The server's bound, as the server gives it, and only the rules the
    // route replays (not the concurrency rule, not CL.THROTTLE).
    const hint = await page.$eval('#view-simulate .hint', (el) => el.textContent);
    assert.match(hint, new RegExp(`Up to ${SIMULATE_MAX}\\.`));
    assert.doesNotMatch(hint, /8 MiB/);
    const offered = await page.$$eval('#sim-rule option', (els) => els.map((e) => e.value));
    assert.deepEqual(offered, ['api', 'jobs', 'login', 'search']);
    await page.select('#sim-rule', 'api');
    const input = await page.$('#sim-file');
    await input.uploadFile(log);
    await page.click('#sim-run');
    await page.waitForSelector('#sim-result:not([hidden])');
    const summary = await page.$$eval('#sim-summary div', (divs) => Object.fromEntries(
      divs.map((d) => [d.querySelector('dt').textContent, d.querySelector('dd').textContent])));
    assert.equal(summary.Events, '126');
    assert.equal(summary.Admitted, '16');
    assert.equal(summary.Denied, '110');
    assert.equal(summary.Subjects, '2');
    const points = await page.$eval('#sim-chart', (el) => Number(el.dataset.points));
    assert.ok(points > 0, 'the chart has the series');
    await page.screenshot({ path: path.join(ARTIFACTS, 'simulate-1280x800-light.png') });
  });

  test('the theme toggle cycles auto, light and dark', async () => {
    const theme = () => page.evaluate(() => document.documentElement.dataset.theme || 'auto');
    assert.equal(await theme(), 'auto');
    await page.click('#theme');
    assert.equal(await theme(), 'light');
    await page.click('#theme');
    assert.equal(await theme(), 'dark');
    await page.click('#theme');
    assert.equal(await theme(), 'auto');
  });

  test('screenshots at 1280x800 and 390x844, light and dark', async () => {
    await page.goto(`${base}/ui/#/`);
    await page.waitForSelector('#top-body tr[data-key]');
    // A subject open in the panel, as someone looking into it would have.
    await page.click('#top-body tr[data-rank="1"] button.inspect');
    await page.waitForSelector('#subject-state .limits');
    for (const [width, height] of [[1280, 800], [390, 844]]) {
      for (const scheme of ['light', 'dark']) {
        await page.setViewport({ width, height });
        await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: scheme }]);
        await page.evaluate(() => window.scrollTo(0, 0));
        await new Promise((r) => setTimeout(r, 300));
        const name = `overview-${width}x${height}-${scheme}`;
        await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`) });
        await page.screenshot({ path: path.join(ARTIFACTS, `${name}-full.png`), fullPage: true });
        // Nothing wider than the screen.
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(overflow <= width, `${name}: the page is ${overflow} px wide`);
      }
    }
    await page.goto(`${base}/ui/#/simulate`);
    await page.waitForSelector('#view-simulate:not([hidden])');
    await page.screenshot({ path: path.join(ARTIFACTS, 'simulate-390x844-dark.png') });
  });

  test('no console errors, page errors or failed requests', () => {
    assert.deepEqual(problems, []);
  });
});
