// The promise API against a live floodgate, in clear and over TLS:
// FG.CHECK's figures, pipelining, FG.STATE, tiers, the server's errors,
// leases; then reconnecting after a restart, and an unreachable or silent
// server. tls.test.mjs has what only TLS has.
//
//   FLOODGATE_BIN=build/release/floodgate node --test clients/node/test/
//
// (after `npm run build` in clients/node).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createRequire } from 'node:module';

import { closedPort, Floodgate, makeCerts, uniqueKey } from './floodgate.mjs';

const require = createRequire(import.meta.url);
const {
  createClient,
  FloodgateConnectionError,
  FloodgateReplyError,
  FloodgateTimeoutError,
} = require('../dist/index.js');

for (const transport of ['plaintext', 'tls']) describe(`floodgate-client (${transport})`, { timeout: 60000 }, () => {
  let certs;
  let server;
  let fg;

  before(async () => {
    if (transport === 'tls') {
      certs = makeCerts();
      server = await new Floodgate(undefined, [], { tls: { certs } }).start();
      fg = createClient({ host: '127.0.0.1', port: server.respPort, tls: { ca: certs.ca } });
    } else {
      server = await new Floodgate().start();
      fg = createClient({ host: '127.0.0.1', port: server.respPort });
    }
  });

  after(async () => {
    await fg?.close();
    await server?.dispose();
    certs?.dispose();
  });

  test('a 5/minute rule admits exactly 5, then denies with a retry time', async () => {
    const key = uniqueKey('check');
    const remaining = [];
    for (let i = 0; i < 5; i++) {
      const r = await fg.check('api', key);
      assert.equal(r.allowed, true, `check ${i + 1}`);
      assert.equal(r.limit, 5);
      assert.equal(r.retryAfterMs, 0);
      assert.equal(r.fallback, '');
      assert.ok(r.resetAfterMs > 59000 && r.resetAfterMs <= 60000, `reset ${r.resetAfterMs}`);
      remaining.push(r.remaining);
    }
    assert.deepEqual(remaining, [4, 3, 2, 1, 0]);
    const denied = await fg.check('api', key);
    assert.equal(denied.allowed, false);
    assert.equal(denied.limit, 5);
    assert.equal(denied.remaining, 0);
    assert.ok(denied.retryAfterMs > 59000 && denied.retryAfterMs <= 60000, `retry ${denied.retryAfterMs}`);
    // A denied check consumes nothing; cost 0 peeks.
    const peek = await fg.check('api', key, { cost: 0 });
    assert.equal(peek.remaining, 0);
  });

  test('cost counts units; a cost over the limit is never admitted', async () => {
    const key = uniqueKey('cost');
    const r = await fg.check('api', key, { cost: 3 });
    assert.deepEqual([r.allowed, r.remaining], [true, 2]);
    const over = await fg.check('api', key, { cost: 3 });
    assert.deepEqual([over.allowed, over.remaining], [false, 2]);
    const never = await fg.check('api', uniqueKey('cost'), { cost: 6 });
    assert.deepEqual([never.allowed, never.retryAfterMs], [false, -1]);
  });

  test('pipelined checks are answered in order: 25 at once on a 10/minute rule admit exactly 10', async () => {
    const key = uniqueKey('pipeline');
    const results = await Promise.all(Array.from({ length: 25 }, () => fg.check('burst', key)));
    assert.equal(results.filter((r) => r.allowed).length, 10);
    // Sent in order on one connection or spread over the pool, the
    // admitted ones saw every remaining figure from 9 down to 0 once.
    const seen = results.filter((r) => r.allowed).map((r) => r.remaining).sort((a, b) => a - b);
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // An error in the middle of a pipeline fails only its own command.
    const mixed = await Promise.allSettled([
      fg.check('api', key),
      fg.check('no-such-rule', key),
      fg.check('api', key),
    ]);
    assert.deepEqual(mixed.map((m) => m.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.deepEqual([mixed[0].value.remaining, mixed[2].value.remaining].sort(), [3, 4]);
  });

  test('tiers: the pro tier has its own limit', async () => {
    const key = uniqueKey('tier');
    const free = await fg.check('plans', key);
    assert.deepEqual([free.limit, free.remaining], [2, 1]);
    const pro = await fg.check('plans', uniqueKey('tier'), { tier: 'pro' });
    assert.deepEqual([pro.limit, pro.remaining], [6, 5]);
  });

  test('state: every limit used and remaining, without consuming; blocks show', async () => {
    const key = uniqueKey('state');
    for (let i = 0; i < 3; i++) await fg.check('api', key);
    const s = await fg.state('api', key);
    assert.equal(s.limits.length, 1);
    assert.deepEqual([s.limits[0].limit, s.limits[0].used, s.limits[0].remaining], [5, 3, 2]);
    assert.ok(s.limits[0].resetAfterMs > 59000 && s.limits[0].resetAfterMs <= 60000);
    assert.deepEqual([s.override, s.blockedForMs, s.blockReason], [[], 0, '']);
    assert.equal((await fg.state('api', key)).limits[0].used, 3, 'state consumed');

    assert.equal(await fg.command(['FG.BLOCK', key, 30000, 'REASON', 'abuse']), 'OK');
    const blocked = await fg.state('api', key);
    assert.ok(blocked.blockedForMs > 29000 && blocked.blockedForMs <= 30000, `${blocked.blockedForMs}`);
    assert.equal(blocked.blockReason, 'abuse');
    const denied = await fg.check('api', key);
    assert.equal(denied.allowed, false);

    assert.equal((await fg.state('plans', key, { tier: 'pro' })).limits[0].limit, 6);
  });

  test('reset and refund', async () => {
    const key = uniqueKey('reset');
    for (let i = 0; i < 5; i++) await fg.check('api', key);
    assert.equal((await fg.check('api', key)).allowed, false);
    const refunded = await fg.refund('api', key, 2);
    assert.equal(refunded.remaining, 2);
    assert.equal((await fg.check('api', key)).remaining, 1);
    await fg.reset('api', key);
    assert.equal((await fg.check('api', key)).remaining, 4);
  });

  test('errors are rejected Errors with the server\'s message (the same the HTTP front gives)', async () => {
    const key = uniqueKey('errors');
    const http = await server.httpGet(`/v1/check?rule=no-such-rule&key=${encodeURIComponent(key)}`);
    assert.equal(http.status, 404);
    await assert.rejects(fg.check('no-such-rule', key), (error) => {
      assert.ok(error instanceof FloodgateReplyError);
      assert.ok(error instanceof Error);
      assert.equal(error.code, 'ERR');
      assert.equal(error.command, 'FG.CHECK');
      assert.equal(error.message, http.body.detail);
      assert.match(error.message, /no-such-rule/);
      return true;
    });
    await assert.rejects(fg.check('plans', key, { tier: 'gold' }), (error) => {
      assert.ok(error instanceof FloodgateReplyError);
      assert.match(error.message, /gold/);
      return true;
    });
    await assert.rejects(fg.check('exports', key), (error) => {
      assert.match(error.message, /FG\.ACQUIRE/);
      return true;
    });
    await assert.rejects(fg.acquire('exports', key, { ttlMs: 0 }), /TTL must be an integer from 1/);
    // The connection is still good.
    assert.equal((await fg.check('api', key)).remaining, 4);
  });

  test('leases: never more than max_in_flight held; release, renew', async () => {
    const key = uniqueKey('lease');
    const first = await Promise.all(Array.from({ length: 8 }, () => fg.acquire('exports', key)));
    const granted = first.filter((a) => a.acquired);
    assert.equal(granted.length, 3);
    for (const a of granted) {
      assert.match(a.lease, /^[0-9a-f]{32}$/);
      assert.equal(a.limit, 3);
      assert.equal(a.ttlMs, 30000);
    }
    for (const a of first.filter((x) => !x.acquired)) {
      assert.deepEqual([a.lease, a.inFlight, a.ttlMs], [null, 3, 0]);
      assert.ok(a.retryAfterMs > 29000 && a.retryAfterMs <= 30000, `${a.retryAfterMs}`);
    }
    assert.equal(new Set(granted.map((a) => a.lease)).size, 3);

    assert.equal(await fg.renew('exports', key, granted[0].lease, { ttlMs: 5000 }), true);
    assert.equal(await fg.release('exports', key, granted[0].lease), true);
    assert.equal(await fg.release('exports', key, granted[0].lease), false);
    assert.equal(await fg.renew('exports', key, granted[0].lease), false);
    const again = await fg.acquire('exports', key, { ttlMs: 1000 });
    assert.deepEqual([again.acquired, again.inFlight, again.ttlMs], [true, 3, 1000]);
    assert.equal((await fg.acquire('exports', key)).acquired, false);

    // A waiting acquire gets the lease another worker releases.
    const waiting = fg.acquire('exports', key, { waitMs: 3000 });
    setTimeout(() => fg.release('exports', key, granted[1].lease), 100);
    const got = await waiting;
    assert.equal(got.acquired, true);
  });

  test('leases under load: 12 workers on one subject never hold more than 3', async () => {
    const key = uniqueKey('load');
    let holding = 0;
    let most = 0;
    let acquired = 0;
    const deadline = Date.now() + 1500;
    const worker = async () => {
      while (Date.now() < deadline) {
        const a = await fg.acquire('exports', key, { ttlMs: 5000, waitMs: 200 });
        if (!a.acquired) continue;
        acquired += 1;
        holding += 1;
        most = Math.max(most, holding);
        assert.ok(a.inFlight <= 3, `in flight ${a.inFlight}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
        holding -= 1;
        assert.equal(await fg.release('exports', key, a.lease), true);
      }
    };
    await Promise.all(Array.from({ length: 12 }, worker));
    assert.equal(most, 3);
    assert.ok(acquired > 20, `only ${acquired} leases in 1.5 s`);
  });
});

describe('connections', { timeout: 60000 }, () => {
  test('the client reconnects after floodgate restarts', async () => {
    const server = await new Floodgate().start();
    const fg = createClient({ port: server.respPort, connections: 1 });
    try {
      const key = uniqueKey('restart');
      assert.equal((await fg.check('api', key)).remaining, 4);
      await server.stop();
      await assert.rejects(fg.check('api', key), (error) => {
        assert.ok(error instanceof FloodgateConnectionError, `${error}`);
        // Refused when the close was seen first; reset when the command was
        // already on its way over the dying connection.
        assert.ok(['ECONNREFUSED', 'ECONNRESET', 'EPIPE'].includes(error.code), error.code);
        assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${server.respPort}`));
        return true;
      });
      await server.start();
      // The embedded store kept nothing (no data_dir): a fresh count.
      assert.equal((await fg.check('api', key)).remaining, 4);
      assert.equal((await fg.check('api', key)).remaining, 3);
    } finally {
      await fg.close();
      await server.dispose();
    }
  });

  test('an unreachable server rejects with a connection error', async () => {
    const port = await closedPort();
    const fg = createClient({ port });
    try {
      await assert.rejects(fg.check('api', 'k'), (error) => {
        assert.ok(error instanceof FloodgateConnectionError);
        assert.equal(error.code, 'ECONNREFUSED');
        return true;
      });
    } finally {
      await fg.close();
    }
  });

  test('a server that never answers: a timeout error within commandTimeoutMs', async () => {
    const sockets = new Set();
    const silent = net.createServer((s) => sockets.add(s));
    await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const fg = createClient({ port: silent.address().port, commandTimeoutMs: 300 });
    try {
      const started = Date.now();
      await assert.rejects(fg.check('api', 'k'), (error) => {
        assert.ok(error instanceof FloodgateTimeoutError, `${error}`);
        assert.match(error.message, /did not answer FG\.CHECK within 300 ms/);
        return true;
      });
      const took = Date.now() - started;
      assert.ok(took >= 290 && took < 2000, `took ${took} ms`);
    } finally {
      await fg.close();
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  test('a closed client refuses commands', async () => {
    const fg = createClient({ port: await closedPort() });
    await fg.close();
    await assert.rejects(fg.check('api', 'k'), /the floodgate client is closed/);
  });
});
