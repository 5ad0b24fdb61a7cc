// The Express middleware and the express-rate-limit Store against a live
// floodgate, with Express and express-rate-limit from npm, driven by real
// HTTP requests.
//
//   FLOODGATE_BIN=build/release/floodgate node --test clients/node/test/
//
// (after `npm run build` in clients/node).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import express from 'express';
import { rateLimit } from 'express-rate-limit';

import { closedPort, Floodgate, uniqueKey } from './floodgate.mjs';

const require = createRequire(import.meta.url);
const { createClient, floodgate, FloodgateStore } = require('../dist/index.js');

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

async function get(url, user) {
  const res = await fetch(url, { headers: user === undefined ? {} : { 'x-user': user } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text.startsWith('{') ? JSON.parse(text) : text };
}

// A header field's seconds figure ("t=57", or Retry-After's number).
function seconds(field, name) {
  if (name === undefined) return Number(field);
  const m = new RegExp(`;${name}=(\\d+)`).exec(field);
  assert.ok(m, `${name}= in ${field}`);
  return Number(m[1]);
}

describe('Express middleware', { timeout: 60000 }, () => {
  let fgServer, client, app, web;

  before(async () => {
    fgServer = await new Floodgate().start();
    client = createClient({ port: fgServer.respPort });
    app = express();
    app.get(
      '/limited',
      floodgate({ client, rule: 'api', key: (req) => req.get('x-user'), windowMs: 60000 }),
      (req, res) => res.json({ ok: true, remaining: req.floodgate.remaining }),
    );
    app.get(
      '/heavy',
      floodgate({ client, rule: 'api', key: (req) => req.get('x-user'), cost: () => 2 }),
      (req, res) => res.json({ ok: true }),
    );
    app.get(
      '/misconfigured',
      floodgate({ client, rule: 'no-such-rule', key: (req) => req.get('x-user') }),
      (req, res) => res.json({ ok: true }),
    );
    const down = createClient({ port: await closedPort(), connectTimeoutMs: 500 });
    app.get('/down-allow', floodgate({ client: down, rule: 'api', key: () => 'k' }), (req, res) =>
      res.json({ ok: true }));
    app.get(
      '/down-deny',
      floodgate({ client: down, rule: 'api', key: () => 'k', onError: 'deny' }),
      (req, res) => res.json({ ok: true }),
    );
    // Express 5's error path: the server's message in a 500.
    app.use((err, req, res, next) => res.status(500).json({ error: err.message }));
    web = await serve(app);
  });

  after(async () => {
    await web?.close();
    await client?.close();
    await fgServer?.dispose();
  });

  test('a 5/minute rule admits exactly 5 requests, then 429 with the HTTP front\'s fields', async () => {
    const user = uniqueKey('mw');
    for (let i = 0; i < 5; i++) {
      const r = await get(`${web.base}/limited`, user);
      assert.equal(r.status, 200, `request ${i + 1}: ${r.text}`);
      assert.equal(r.body.remaining, 4 - i);
      assert.equal(r.headers.get('ratelimit-policy'), '"api";q=5;w=60');
      const state = r.headers.get('ratelimit');
      assert.match(state, new RegExp(`^"api";r=${4 - i};t=(59|60)$`));
      assert.equal(r.headers.get('retry-after'), null);
    }
    const denied = await get(`${web.base}/limited`, user);
    assert.equal(denied.status, 429);
    assert.equal(denied.headers.get('content-type'), 'application/problem+json');
    assert.equal(denied.body.status, 429);
    assert.equal(denied.body.title, 'Too Many Requests');
    assert.equal(denied.body.rule, 'api');
    assert.deepEqual([denied.body.limit, denied.body.remaining], [5, 0]);
    assert.match(denied.body.detail, /rate limited by rule 'api': retry after (59|60) s/);

    // floodgate's own HTTP front, same rule, same subject, same (unchanged:
    // a denial consumes nothing) state, a moment later.
    const front = await fgServer.httpGet(`/v1/check?rule=api&key=${encodeURIComponent(user)}`);
    assert.equal(front.status, 429);
    assert.equal(denied.headers.get('ratelimit-policy'), front.headers.get('ratelimit-policy'));
    const [mine, theirs] = [denied.headers.get('ratelimit'), front.headers.get('ratelimit')];
    assert.equal(mine.replace(/;t=\d+$/, ''), theirs.replace(/;t=\d+$/, ''));
    assert.equal(mine.replace(/;t=\d+$/, ''), '"api";r=0');
    // The seconds can tick over between the two requests: equal, or the
    // later one a second less.
    const dt = seconds(mine, 't') - seconds(theirs, 't');
    assert.ok(dt === 0 || dt === 1, `${mine} vs ${theirs}`);
    const dr = seconds(denied.headers.get('retry-after')) - seconds(front.headers.get('retry-after'));
    assert.ok(dr === 0 || dr === 1, `Retry-After ${denied.headers.get('retry-after')} vs ${front.headers.get('retry-after')}`);
    const dms = denied.body.retry_after_ms - front.body.retry_after_ms;
    assert.ok(dms >= 0 && dms < 1000, `retry_after_ms ${denied.body.retry_after_ms} vs ${front.body.retry_after_ms}`);
  });

  test('cost per request: 2 units each, so 2 requests then 429', async () => {
    const user = uniqueKey('cost');
    assert.equal((await get(`${web.base}/heavy`, user)).status, 200);
    const second = await get(`${web.base}/heavy`, user);
    assert.equal(second.status, 200);
    assert.equal(second.headers.get('ratelimit-policy'), '"api";q=5');
    assert.match(second.headers.get('ratelimit'), /^"api";r=1;t=(59|60)$/);
    assert.equal((await get(`${web.base}/heavy`, user)).status, 429);
  });

  test('an error floodgate answers goes to Express\'s error handler with the server\'s message', async () => {
    const r = await get(`${web.base}/misconfigured`, uniqueKey('err'));
    assert.equal(r.status, 500);
    const front = await fgServer.httpGet('/v1/check?rule=no-such-rule&key=x');
    assert.equal(r.body.error, front.body.detail);
  });

  test('floodgate unreachable: onError allow (default) lets the request through, deny answers 429', async () => {
    const allowed = await get(`${web.base}/down-allow`);
    assert.equal(allowed.status, 200);
    assert.equal(allowed.headers.get('ratelimit'), null);
    const denied = await get(`${web.base}/down-deny`);
    assert.equal(denied.status, 429);
    assert.equal(denied.headers.get('floodgate-fallback'), 'unreachable');
    assert.equal(denied.headers.get('content-type'), 'application/problem+json');
    assert.match(denied.body.detail, /unreachable/);
  });
});

describe('express-rate-limit Store', { timeout: 60000 }, () => {
  let fgServer, client, web;

  before(async () => {
    fgServer = await new Floodgate().start();
    client = createClient({ port: fgServer.respPort });
    const app = express();
    const keyGenerator = (req) => req.get('x-user');
    const matching = rateLimit({
      windowMs: 60000,
      limit: 4,
      standardHeaders: 'draft-7',
      legacyHeaders: false,
      keyGenerator,
      store: new FloodgateStore({ client, rule: 'erl' }),
    });
    // express-rate-limit told a larger limit: floodgate still decides.
    const larger = rateLimit({
      windowMs: 60000,
      limit: 100,
      keyGenerator,
      store: new FloodgateStore({ client, rule: 'erl', prefix: 'larger:' }),
    });
    // skipFailedRequests: a failed request's unit is refunded (FG.REFUND).
    const refunding = rateLimit({
      windowMs: 60000,
      limit: 4,
      keyGenerator,
      skipFailedRequests: true,
      store: new FloodgateStore({ client, rule: 'erl', prefix: 'refund:' }),
    });
    app.get('/erl', matching, (req, res) => res.json({ ok: true }));
    app.get('/erl-larger', larger, (req, res) => res.json({ ok: true }));
    app.get('/erl-fails', refunding, (req, res) => res.status(500).json({ failed: true }));
    app.get('/erl-reset', async (req, res) => {
      await matching.resetKey(req.get('x-user'));
      res.json(await matching.getKey(req.get('x-user')));
    });
    app.get('/erl-get', async (req, res) => res.json(await matching.getKey(req.get('x-user'))));
    web = await serve(app);
  });

  after(async () => {
    await web?.close();
    await client?.close();
    await fgServer?.dispose();
  });

  test('admits exactly the rule\'s count, with floodgate\'s figures in its headers', async () => {
    const user = uniqueKey('erl');
    for (let i = 0; i < 4; i++) {
      const r = await get(`${web.base}/erl`, user);
      assert.equal(r.status, 200, `request ${i + 1}`);
      // draft-7: "limit=4, remaining=N, reset=S"
      assert.match(r.headers.get('ratelimit'), new RegExp(`^limit=4, remaining=${3 - i}, reset=(59|60)$`));
    }
    const denied = await get(`${web.base}/erl`, user);
    assert.equal(denied.status, 429);
    assert.match(denied.headers.get('ratelimit'), /^limit=4, remaining=0, reset=(59|60)$/);
    const state = await client.state('erl', user);
    assert.equal(state.limits[0].used, 4, 'the denied request consumed nothing');
    const front = await fgServer.httpGet(`/v1/check?rule=erl&key=${encodeURIComponent(user)}`);
    assert.equal(front.status, 429);
    const dr = Number(denied.headers.get('retry-after')) - Number(front.headers.get('retry-after'));
    assert.ok(dr === 0 || dr === 1, `Retry-After ${denied.headers.get('retry-after')} vs ${front.headers.get('retry-after')}`);

    const peek = await get(`${web.base}/erl-get`, user);
    assert.equal(peek.body.totalHits, 4);
    const reset = await get(`${web.base}/erl-reset`, user);
    assert.equal(reset.body.totalHits, 0);
    assert.equal((await get(`${web.base}/erl`, user)).status, 200);
  });

  test('with a larger limit in express-rate-limit, floodgate still decides', async () => {
    const user = uniqueKey('larger');
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await get(`${web.base}/erl-larger`, user)).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
  });

  test('skipFailedRequests refunds the unit of a failed request', async () => {
    const user = uniqueKey('fails');
    // express-rate-limit decrements after the response has gone: each
    // request waits for its refund. Without refunds the 5th would be a 429.
    for (let i = 0; i < 6; i++) {
      assert.equal((await get(`${web.base}/erl-fails`, user)).status, 500, `request ${i + 1}`);
      let used = -1;
      for (let tries = 0; tries < 100 && used !== 0; tries++) {
        used = (await client.state('erl', `refund:${user}`)).limits[0].used;
        if (used !== 0) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.equal(used, 0, `request ${i + 1} refunded`);
    }
  });
});
