// floodgate driven by ioredis. Run by test_resp_node.py:
//   node ioredis_test.js PORT AUTH_PORT TOKEN
// against a server whose rules are test_resp_node.py's CONFIG. Exits 0 when
// every expectation holds, 1 (with the mismatches on stderr) otherwise.
'use strict';

const assert = require('node:assert/strict');
const Redis = require('ioredis');

const [port, authPort, token] = process.argv.slice(2);
if (!port || !authPort || !token) {
  console.error('usage: node ioredis_test.js PORT AUTH_PORT TOKEN');
  process.exit(2);
}

function connect(p, extra = {}) {
  return new Redis({
    host: '127.0.0.1',
    port: Number(p),
    enableReadyCheck: true, // sends INFO and waits for loading:0
    maxRetriesPerRequest: 0,
    retryStrategy: () => null, // fail fast, no reconnect loop
    connectTimeout: 5000,
    ...extra,
  });
}

function waitReady(client) {
  return new Promise((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
    client.once('end', () => reject(new Error('connection ended before ready')));
  });
}

const steps = [];
function step(name, fn) {
  steps.push([name, fn]);
}

step('ready check (INFO) and PING', async () => {
  const r = connect(port);
  await waitReady(r);
  assert.equal(r.status, 'ready');
  assert.equal(await r.ping(), 'PONG');
  assert.equal(await r.echo('ioredis'), 'ioredis');
  r.disconnect();
});

step('FG.CHECK with call()', async () => {
  const r = connect(port);
  await waitReady(r);
  const d = await r.call('FG.CHECK', 'api', 'node:user');
  assert.deepEqual(d.slice(0, 4), [1, 60, 59, 0]);
  assert.ok(d[4] > 0 && d[4] <= 60000, `reset_after_ms ${d[4]}`);
  const d2 = await r.call('FG.CHECK', 'api', 'node:user', 'COST', '5');
  assert.deepEqual(d2.slice(0, 3), [1, 60, 54]);
  await assert.rejects(r.call('FG.CHECK', 'nope', 'k'), /unknown rule 'nope'/);
  await assert.rejects(r.call('FG.CHECK', 'api'), /wrong number of arguments for 'fg.check'/);
  // The connection still works after errors.
  assert.equal(await r.ping(), 'PONG');
  r.disconnect();
});

step('pipeline of 100 FG.CHECK: exactly 25 allowed, in order', async () => {
  const r = connect(port);
  await waitReady(r);
  const p = r.pipeline();
  for (let i = 0; i < 100; i++) p.call('FG.CHECK', 'quota', 'node:pipe');
  const results = await p.exec();
  assert.equal(results.length, 100);
  const allowed = results.map(([err, d]) => {
    assert.equal(err, null);
    return d[0];
  });
  assert.deepEqual(allowed, Array(25).fill(1).concat(Array(75).fill(0)));
  assert.deepEqual(results.slice(0, 25).map(([, d]) => d[2]),
                   Array.from({ length: 25 }, (_, i) => 24 - i));
  r.disconnect();
});

step('auto-pipelining with concurrent promises', async () => {
  const r = connect(port, { enableAutoPipelining: true });
  await waitReady(r);
  const all = await Promise.all(
    Array.from({ length: 200 }, (_, i) => r.call('FG.CHECK', 'api', `node:auto:${i % 4}`)));
  const allowed = all.filter((d) => d[0] === 1).length;
  assert.equal(allowed, 200); // 50 per key, limit 60
  const remaining = all.filter((d) => d[2] === 10).length;
  assert.equal(remaining, 4); // the 50th of each key
  r.disconnect();
});

step('CL.THROTTLE', async () => {
  const r = connect(port);
  await waitReady(r);
  assert.deepEqual(await r.call('CL.THROTTLE', 'node:cell', '4', '1', '1'), [0, 5, 4, -1, 1]);
  // One per minute, burst 4 (a long period: a slow machine cannot refill mid-test).
  assert.deepEqual(await r.call('CL.THROTTLE', 'node:seq', 4, 1, 60), [0, 5, 4, -1, 60]);
  for (const rem of [3, 2, 1, 0]) {
    assert.deepEqual((await r.call('CL.THROTTLE', 'node:seq', 4, 1, 60)).slice(0, 4),
                     [0, 5, rem, -1]);
  }
  const limited = await r.call('CL.THROTTLE', 'node:seq', 4, 1, 60);
  assert.deepEqual(limited.slice(0, 3), [1, 5, 0]);
  assert.ok(limited[3] >= 50 && limited[3] <= 60, `retry_after_s ${limited[3]}`);
  await assert.rejects(r.call('CL.THROTTLE', 'node:cell', 4, 0, 1), /ERR/);
  await assert.rejects(r.call('CL.THROTTLE', 'node:cell', 4, 'x', 1), /ERR/);
  r.disconnect();
});

step('FG.RESET', async () => {
  const r = connect(port);
  await waitReady(r);
  for (let i = 0; i < 25; i++) await r.call('FG.CHECK', 'quota', 'node:reset');
  assert.equal((await r.call('FG.CHECK', 'quota', 'node:reset'))[0], 0);
  assert.equal(await r.call('FG.RESET', 'quota', 'node:reset'), 'OK');
  assert.deepEqual((await r.call('FG.CHECK', 'quota', 'node:reset')).slice(0, 3), [1, 25, 24]);
  r.disconnect();
});

step('auth: password option, and NOAUTH without it', async () => {
  const r = connect(authPort, { password: token });
  await waitReady(r);
  assert.deepEqual((await r.call('FG.CHECK', 'api', 'node:auth')).slice(0, 3), [1, 60, 59]);
  r.disconnect();
  // Without a password the ready check's INFO is refused: no 'ready'.
  const anon = connect(authPort, { enableReadyCheck: false, lazyConnect: true });
  await anon.connect();
  await assert.rejects(anon.call('FG.CHECK', 'api', 'node:auth'), /NOAUTH/);
  anon.disconnect();
  const wrong = connect(authPort, { password: 'wrong', enableReadyCheck: false,
                                    lazyConnect: true });
  // ioredis reports the failed AUTH as an 'error' event, then the command
  // fails (the connection is dropped) or is refused with NOAUTH.
  const seen = [];
  wrong.on('error', (e) => seen.push(String(e)));
  let pinged = false;
  try {
    await wrong.connect();
    pinged = (await wrong.ping()) === 'PONG';
  } catch (e) {
    seen.push(String(e));
  }
  assert.ok(!pinged, 'a wrong password must not give a working connection');
  assert.ok(seen.some((s) => /WRONGPASS/.test(s)), `want WRONGPASS, saw ${seen}`);
  wrong.disconnect();
});

(async () => {
  let failures = 0;
  for (const [name, fn] of steps) {
    try {
      await fn();
      console.log(`ok   ${name}`);
    } catch (e) {
      failures++;
      console.error(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  process.exit(failures === 0 ? 0 : 1);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
