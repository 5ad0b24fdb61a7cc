// Reservations against a live floodgate: reserve() and settle() of the
// promise API (FG.RESERVE, FG.SETTLE), check()'s priority, and the Express
// middleware's `reserve` option settling from the responses of a real
// Express app (openAIUsage reading usage.total_tokens).
//
//   FLOODGATE_BIN=build/release/floodgate node --test clients/node/test/
//
// (after `npm run build` in clients/node).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import express from 'express';

import { Floodgate, uniqueKey } from './floodgate.mjs';

const require = createRequire(import.meta.url);
const { createClient, floodgate, FloodgateReplyError, openAIUsage } = require('../dist/index.js');

// fixed_window over a day: the used count is the sum of what was charged,
// whatever the clock does within the test (short of midnight UTC).
const CONFIG = `
rules:
  tokens: { algorithm: fixed_window, limits: [1000/day] }
  small: { algorithm: fixed_window, limits: [100/day] }
  shed:
    algorithm: sliding_log
    limits: [10/minute]
    priorities: { critical: 0%, default: 20%, batch: 40% }
`;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function used(fg, rule, key) {
  return (await fg.state(rule, key)).limits[0].used;
}

describe('reserve and settle', { timeout: 60000 }, () => {
  let server, fg;

  before(async () => {
    server = await new Floodgate(CONFIG).start();
    fg = createClient({ port: server.respPort });
  });

  after(async () => {
    await fg?.close();
    await server?.dispose();
  });

  test('a reservation takes its estimate; settling charges the actual instead', async () => {
    const key = uniqueKey('settle');
    const r = await fg.reserve('tokens', key, 300);
    assert.equal(r.admitted, true);
    assert.equal(typeof r.reservation, 'string');
    assert.ok(r.reservation.length > 0);
    assert.equal(r.remaining, 700);
    assert.ok(r.resetAfterMs > 0, `reset ${r.resetAfterMs}`);
    assert.equal(await used(fg, 'tokens', key), 300);

    // Less than the estimate: the difference is given back.
    assert.deepEqual(await fg.settle('tokens', key, r.reservation, 120), { charged: 120, remaining: 880 });
    assert.equal(await used(fg, 'tokens', key), 120);

    // More than the estimate: the difference is charged.
    const more = await fg.reserve('tokens', key, 100, { ttlMs: 60000 });
    assert.deepEqual([more.admitted, more.remaining], [true, 780]);
    assert.deepEqual(await fg.settle('tokens', key, more.reservation, 250), { charged: 250, remaining: 630 });
    assert.equal(await used(fg, 'tokens', key), 370);
  });

  test('an actual past the limit leaves the subject in debt, and denied', async () => {
    const key = uniqueKey('debt');
    const r = await fg.reserve('small', key, 50);
    assert.equal(r.admitted, true);
    const s = await fg.settle('small', key, r.reservation, 130);
    assert.deepEqual(s, { charged: 130, remaining: -30 });
    const check = await fg.check('small', key);
    assert.equal(check.allowed, false);
    const again = await fg.reserve('small', key, 1);
    assert.deepEqual([again.admitted, again.reservation], [false, null]);
  });

  test('an estimate that does not fit is denied, consuming nothing', async () => {
    const key = uniqueKey('deny');
    assert.equal((await fg.reserve('small', key, 80)).admitted, true);
    const denied = await fg.reserve('small', key, 30);
    assert.equal(denied.admitted, false);
    assert.equal(denied.reservation, null);
    assert.equal(denied.remaining, 20);
    assert.ok(denied.resetAfterMs > 0, `reset ${denied.resetAfterMs}`);
    assert.equal(await used(fg, 'small', key), 80);
    // What fits still does.
    assert.equal((await fg.reserve('small', key, 20)).admitted, true);
  });

  test('settle errors are floodgate\'s: unknown, another key\'s, settled already, bad numbers', async () => {
    const key = uniqueKey('errors');
    const r = await fg.reserve('tokens', key, 10);
    const rejects = async (promise, pattern) => {
      await assert.rejects(promise, (error) => {
        assert.ok(error instanceof FloodgateReplyError, `${error}`);
        assert.equal(error.command, 'FG.SETTLE');
        assert.match(error.message, pattern);
        return true;
      });
    };
    await rejects(fg.settle('tokens', key, 'no-such-reservation', 5), /no reservation/);
    await rejects(fg.settle('tokens', uniqueKey('other'), r.reservation, 5), /no reservation/);
    await rejects(fg.settle('tokens', key, r.reservation, -1), /actual must be an integer/);
    await rejects(fg.settle('tokens', key, r.reservation, 'many'), /actual must be an integer/);
    assert.deepEqual(await fg.settle('tokens', key, r.reservation, 5), { charged: 5, remaining: 995 });
    await rejects(fg.settle('tokens', key, r.reservation, 5), /settled already/);
    assert.equal(await used(fg, 'tokens', key), 5);
    // A bad estimate is refused by FG.RESERVE.
    await assert.rejects(fg.reserve('tokens', key, 0), /estimate must be an integer/);
  });

  test('a reservation not settled within its TTL settles at its estimate', async () => {
    const key = uniqueKey('ttl');
    const r = await fg.reserve('tokens', key, 40, { ttlMs: 200 });
    assert.equal(r.admitted, true);
    await sleep(600);
    await assert.rejects(fg.settle('tokens', key, r.reservation, 1), /no reservation/);
    assert.equal(await used(fg, 'tokens', key), 40);
  });

  test('check\'s priority: batch is denied once 60% is used, critical may use it all', async () => {
    const key = uniqueKey('priority');
    const batch = [];
    for (let i = 0; i < 7; i++) batch.push((await fg.check('shed', key, { priority: 'batch' })).allowed);
    assert.deepEqual(batch, [true, true, true, true, true, true, false]);
    assert.equal((await fg.check('shed', key, { priority: 'default' })).allowed, true);
    assert.equal((await fg.check('shed', key, { priority: 'default' })).allowed, true);
    assert.equal((await fg.check('shed', key, { priority: 'default' })).allowed, false);
    assert.equal((await fg.check('shed', key, { priority: 'critical' })).allowed, true);
    assert.equal((await fg.check('shed', key, { priority: 'critical' })).allowed, true);
    assert.equal((await fg.check('shed', key, { priority: 'critical' })).allowed, false);
    await assert.rejects(fg.check('shed', key, { priority: 'no-such-class' }), FloodgateReplyError);
  });
});

// Serves `app` on a free loopback port; resolves with its base URL and a close().
async function serve(app) {
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

async function post(url, user, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user': user },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text.startsWith('{') ? JSON.parse(text) : text };
}

describe('Express middleware with reserve', { timeout: 60000 }, () => {
  let server, fg, web;
  // Every settle the middleware made, and who waits for the next ones.
  const outcomes = [];
  const waiters = [];
  const errors = [];
  const onSettle = (outcome) => {
    outcomes.push(outcome);
    for (const w of waiters.splice(0)) w();
  };
  // Resolves with the outcomes of `key` once there are `n` of them.
  async function settledFor(key, n) {
    const deadline = Date.now() + 5000;
    for (;;) {
      const mine = outcomes.filter((o) => o.key === key);
      if (mine.length >= n) return mine;
      assert.ok(Date.now() < deadline, `${mine.length} of ${n} settles for ${key}`);
      await new Promise((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }

  before(async () => {
    server = await new Floodgate(CONFIG).start();
    fg = createClient({ port: server.respPort });
    const app = express();
    app.use(express.json());
    const limited = (settle, extra = {}) =>
      floodgate({
        client: fg,
        rule: 'tokens',
        key: (req) => req.get('x-user'),
        reserve: { estimate: (req) => Number(req.body?.max_tokens ?? 100), settle, ...extra },
        onSettle,
        logger: (error) => errors.push(error),
      });
    // An OpenAI-shaped completion that used body.used tokens.
    const completion = (req, res) =>
      res.json({
        id: 'chatcmpl-test',
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: req.body.used - 1, total_tokens: req.body.used },
      });
    app.post('/v1/chat/completions', limited(openAIUsage), completion);
    // The same JSON as text through res.send(), and through res.end().
    app.post('/send', limited(openAIUsage), (req, res) =>
      res.type('application/json').send(JSON.stringify({ usage: { total_tokens: req.body.used } })));
    app.post('/end', limited(openAIUsage), (req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(Buffer.from(JSON.stringify({ usage: { total_tokens: req.body.used } })));
    });
    // Fallbacks: not JSON; a stream of events; past maxBodyBytes; a throw.
    app.post('/text', limited(openAIUsage), (req, res) => res.type('text/plain').send('total_tokens: 3'));
    app.post('/stream', limited(openAIUsage), (req, res) => {
      res.setHeader('content-type', 'text/event-stream');
      res.write('data: {"usage":{"total_tokens":3}}\n\n');
      res.end('data: [DONE]\n\n');
    });
    app.post('/big', limited(openAIUsage, { maxBodyBytes: 64 }), (req, res) => {
      res.setHeader('content-type', 'application/json');
      res.write(`{"pad":"${'x'.repeat(100)}",`);
      res.end('"usage":{"total_tokens":3}}');
    });
    app.post('/throws', limited(openAIUsage), () => {
      throw new Error('the model fell over');
    });
    app.post('/callback-throws', limited(() => {
      throw new Error('bad callback');
    }), completion);
    // An async callback of one's own.
    app.post('/async', limited(async (req) => req.body.used * 2), (req, res) => res.json({ ok: true }));
    // The handler settles the reservation itself: the middleware's settle fails.
    app.post('/settles-itself', limited(openAIUsage), async (req, res) => {
      const r = req.floodgateReservation;
      await fg.settle('tokens', req.get('x-user'), r.reservation, 7);
      completion(req, res);
    });
    app.use((err, req, res, next) => res.status(500).json({ error: err.message }));
    web = await serve(app);
  });

  after(async () => {
    await web?.close();
    await fg?.close();
    await server?.dispose();
  });

  test('settles each request at its usage.total_tokens: used is the sum', async () => {
    const user = uniqueKey('mw-sum');
    const totals = [37, 120, 5, 256];
    for (const [i, used] of totals.entries()) {
      const r = await post(`${web.base}/v1/chat/completions`, user, { max_tokens: 300, used });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.usage.total_tokens, used);
      const rl = r.headers.get('ratelimit');
      const before = 1000 - totals.slice(0, i).reduce((a, b) => a + b, 0);
      // The estimate is taken first; what the earlier requests were charged stands.
      assert.match(rl, new RegExp(`^"tokens";r=${before - 300};t=\\d+$`), `request ${i + 1}: ${rl}`);
      // Settled after the response went: wait for it before the next one.
      await settledFor(user, i + 1);
    }
    const outcomes = await settledFor(user, totals.length);
    assert.deepEqual(outcomes.map((o) => [o.estimate, o.actual, o.fromResponse, o.result?.charged]),
      totals.map((t) => [300, t, true, t]));
    assert.equal(await used(fg, 'tokens', user), 37 + 120 + 5 + 256);
  });

  test('the JSON read from res.send() and res.end() bytes too', async () => {
    const user = uniqueKey('mw-bytes');
    assert.equal((await post(`${web.base}/send`, user, { max_tokens: 50, used: 11 })).status, 200);
    assert.equal((await post(`${web.base}/end`, user, { max_tokens: 50, used: 13 })).status, 200);
    const outcomes = await settledFor(user, 2);
    assert.deepEqual(outcomes.map((o) => [o.actual, o.fromResponse]), [[11, true], [13, true]]);
    assert.equal(await used(fg, 'tokens', user), 24);
  });

  test('no figure from the response settles at the estimate: text, events, past the bound, a throw', async () => {
    const user = uniqueKey('mw-fallback');
    const errorsBefore = errors.length;
    for (const [path, status] of [['/text', 200], ['/stream', 200], ['/big', 200], ['/throws', 500],
      ['/callback-throws', 200]]) {
      const r = await post(`${web.base}${path}`, user, { max_tokens: 40, used: 3 });
      assert.equal(r.status, status, `${path}: ${r.text}`);
    }
    const outcomes = await settledFor(user, 5);
    assert.deepEqual(outcomes.map((o) => [o.actual, o.fromResponse, o.result?.charged]),
      Array(5).fill([40, false, 40]));
    assert.equal(await used(fg, 'tokens', user), 200);
    // The callback's throw was logged; nothing else was.
    assert.deepEqual(errors.slice(errorsBefore).map((e) => e.message), ['bad callback']);
  });

  test('an async settle callback', async () => {
    const user = uniqueKey('mw-async');
    assert.equal((await post(`${web.base}/async`, user, { max_tokens: 40, used: 3 })).status, 200);
    const [outcome] = await settledFor(user, 1);
    assert.deepEqual([outcome.actual, outcome.fromResponse], [6, true]);
    assert.equal(await used(fg, 'tokens', user), 6);
  });

  test('an estimate that does not fit: 429 with Retry-After, the handler not called', async () => {
    const user = uniqueKey('mw-deny');
    assert.equal((await post(`${web.base}/v1/chat/completions`, user, { max_tokens: 900, used: 900 })).status, 200);
    await settledFor(user, 1);
    const denied = await post(`${web.base}/v1/chat/completions`, user, { max_tokens: 200, used: 1 });
    assert.equal(denied.status, 429);
    assert.equal(denied.headers.get('content-type'), 'application/problem+json');
    assert.equal(denied.body.title, 'Too Many Requests');
    assert.equal(denied.body.rule, 'tokens');
    assert.deepEqual([denied.body.estimate, denied.body.remaining], [200, 100]);
    assert.match(denied.body.detail, /an estimate of 200 does not fit; retry after \d+ s/);
    const retry = Number(denied.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 86400, `Retry-After ${retry}`);
    assert.equal(retry, Math.ceil(denied.body.reset_after_ms / 1000));
    assert.match(denied.headers.get('ratelimit'), /^"tokens";r=100;t=\d+$/);
    // No reservation, so nothing to settle; the used count is the first request's.
    await sleep(100);
    assert.equal(outcomes.filter((o) => o.key === user).length, 1);
    assert.equal(await used(fg, 'tokens', user), 900);
    // What fits still goes through.
    assert.equal((await post(`${web.base}/v1/chat/completions`, user, { max_tokens: 100, used: 1 })).status, 200);
  });

  test('a failed settle is logged and told to onSettle; the response is untouched', async () => {
    const user = uniqueKey('mw-settle-error');
    const errorsBefore = errors.length;
    const r = await post(`${web.base}/settles-itself`, user, { max_tokens: 50, used: 20 });
    assert.equal(r.status, 200);
    assert.equal(r.body.usage.total_tokens, 20);
    const [outcome] = await settledFor(user, 1);
    assert.equal(outcome.result, undefined);
    assert.ok(outcome.error instanceof FloodgateReplyError);
    assert.match(outcome.error.message, /settled already/);
    assert.deepEqual(errors.slice(errorsBefore), [outcome.error]);
    assert.equal(await used(fg, 'tokens', user), 7);
  });

  test('reserve with cost or waitMs is refused when the middleware is made', () => {
    const options = { client: fg, rule: 'tokens', key: () => 'k', reserve: { estimate: 1 } };
    assert.throws(() => floodgate({ ...options, cost: 2 }), TypeError);
    assert.throws(() => floodgate({ ...options, waitMs: 10 }), TypeError);
    assert.throws(() => floodgate({ ...options, reserve: { estimate: 'ten' } }), TypeError);
  });
});
