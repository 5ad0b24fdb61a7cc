// An independent client of floodgate's Envoy RateLimitService: @grpc/grpc-js
// with the messages loaded at run time by @grpc/proto-loader from the
// repository's proto/ files (no generated code shared with the server).
//
//   node rls_test.js <grpc port> <domain prefix>
//
// The server must serve test_grpc.py's Envoy file (README examples 2, 3, 5,
// 6, 7 and 9 of envoyproxy/ratelimit) under domains prefixed with <domain
// prefix>, with response headers on. Prints "ok   <check>" per check; exits 1
// at the first failure.
'use strict';

const assert = require('assert');
const grpc = require('@grpc/grpc-js');
const { connect } = require('./rls_client');

const [port, prefix] = process.argv.slice(2);
if (!port || prefix === undefined) {
  console.error('usage: node rls_test.js <grpc port> <domain prefix>');
  process.exit(2);
}

const client = connect(port);

function call(request) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + 5000);
    client.ShouldRateLimit(request, { deadline }, (err, response) => {
      if (err) reject(err);
      else resolve(response);
    });
  });
}

function descriptor(entries, hits) {
  const d = { entries: Object.entries(entries).map(([key, value]) => ({ key, value })) };
  if (hits !== undefined) d.hits_addend = { value: hits };
  return d;
}

// Per-second limits: start at the beginning of a second, so that a check's
// requests all fall in one window.
function freshSecond() {
  return new Promise((resolve) => setTimeout(resolve, 1010 - (Date.now() % 1000)));
}

async function admitted(domain, entries, n) {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const r = await call({ domain: prefix + domain, descriptors: [descriptor(entries)] });
    if (r.overall_code === 'OK') ok++;
  }
  return ok;
}

const checks = [
  ['example 2: nested descriptors, and an over-limit request is not counted', async () => {
    const marketing = descriptor({ message_type: 'marketing', to_number: '2061111111' });
    const number = descriptor({ to_number: '2061111111' });
    for (let i = 0; i < 5; i++) {
      const r = await call({ domain: prefix + 'messaging', descriptors: [marketing, number] });
      assert.strictEqual(r.overall_code, 'OK');
      assert.strictEqual(r.statuses.length, 2);
      assert.strictEqual(r.statuses[0].limit_remaining, 4 - i);
      assert.strictEqual(r.statuses[0].current_limit.requests_per_unit, 5);
      assert.strictEqual(r.statuses[0].current_limit.unit, 'DAY');
      assert.ok(Number(r.statuses[0].duration_until_reset.seconds) > 0);
    }
    const over = await call({ domain: prefix + 'messaging', descriptors: [marketing, number] });
    assert.strictEqual(over.overall_code, 'OVER_LIMIT');
    assert.strictEqual(over.statuses[0].code, 'OVER_LIMIT');
    assert.strictEqual(over.statuses[1].code, 'OK');
    assert.strictEqual(over.statuses[1].limit_remaining, 95);
    const headers = Object.fromEntries(over.response_headers_to_add.map((h) => [h.key, h.value]));
    assert.deepStrictEqual(Object.keys(headers), ['RateLimit-Limit', 'RateLimit-Remaining',
      'RateLimit-Reset', 'floodgate-limit']);
    assert.strictEqual(headers['RateLimit-Remaining'], '0');
    // What bound it: the deciding rule and its limit, as the HTTP front's
    // Floodgate-Limit field (docs/visibility.md).
    assert.match(headers['floodgate-limit'], /^[^,]+;5\/day$/);
  }],
  ['example 3: a value named in the config wins over the key alone', async () => {
    await freshSecond();
    assert.strictEqual(await admitted('edge_proxy_per_ip', { remote_address: '50.0.0.1' }, 11), 10);
    assert.strictEqual(await admitted('edge_proxy_per_ip', { remote_address: '50.0.0.5' }, 3), 0);
  }],
  ['example 5: unlimited', async () => {
    const r = await call({ domain: prefix + 'internal', descriptors: [descriptor({ ldap: 'x' })] });
    assert.strictEqual(r.overall_code, 'OK');
    assert.strictEqual(r.statuses[0].limit_remaining, 4294967295);
    assert.strictEqual(r.statuses[0].current_limit, null);
    assert.strictEqual(await admitted('internal', { azure: 'x' }, 101), 100);
  }],
  ['example 6: shadow mode answers OK', async () => {
    await freshSecond();
    assert.strictEqual(await admitted('example6', { service: 's', user: 'user-a' }, 15), 15);
    assert.strictEqual(await admitted('example6', { service: 's', user: 'user-b' }, 21), 20);
  }],
  ['example 7: replaces', async () => {
    await freshSecond();
    const one = descriptor({ key_1: 'value_1', user: 'bkthomps' });
    const two = descriptor({ key_2: 'value_2', user: 'bkthomps' });
    let ok = 0;
    for (let i = 0; i < 11; i++) {
      const r = await call({ domain: prefix + 'example7', descriptors: [one, two] });
      assert.strictEqual(r.statuses[0].current_limit, null);
      if (r.overall_code === 'OK') ok++;
    }
    assert.strictEqual(ok, 10);
    assert.strictEqual(await admitted('example7', { key_1: 'value_1', user: 'bkthomps' }, 6), 5);
  }],
  ['example 9: wildcard values, one counter per value', async () => {
    assert.strictEqual(await admitted('example9', { key1: 'value_1' }, 21), 20);
    assert.strictEqual(await admitted('example9', { key1: 'value_2' }, 21), 20);
    assert.strictEqual(await admitted('example9', { key1: 'other' }, 25), 25);
  }],
  ['hits_addend: request level, per descriptor, and 0 to check only', async () => {
    const d = prefix + 'messaging';
    let r = await call({ domain: d, hits_addend: 10, descriptors: [descriptor({ to_number: 'h' })] });
    assert.strictEqual(r.statuses[0].limit_remaining, 90);
    r = await call({ domain: d, hits_addend: 10, descriptors: [descriptor({ to_number: 'h' }, 0)] });
    assert.strictEqual(r.statuses[0].limit_remaining, 90);
    r = await call({ domain: d, hits_addend: 10, descriptors: [descriptor({ to_number: 'h' }, 3)] });
    assert.strictEqual(r.statuses[0].limit_remaining, 87);
  }],
  ['unknown domain: OK, a status per descriptor, no limits', async () => {
    const r = await call({ domain: prefix + 'nope', descriptors: [descriptor({ a: 'b' }),
      descriptor({ c: 'd' })] });
    assert.strictEqual(r.overall_code, 'OK');
    assert.strictEqual(r.statuses.length, 2);
    assert.strictEqual(r.statuses[1].current_limit, null);
  }],
  ['bad requests: INVALID_ARGUMENT with envoyproxy/ratelimit\'s messages', async () => {
    await assert.rejects(call({ domain: '', descriptors: [descriptor({ a: 'b' })] }), (e) =>
      e.code === grpc.status.INVALID_ARGUMENT && /domain must not be empty/.test(e.details));
    await assert.rejects(call({ domain: prefix + 'messaging', descriptors: [] }), (e) =>
      e.code === grpc.status.INVALID_ARGUMENT && /descriptor list must not be empty/.test(e.details));
  }],
];

(async () => {
  for (const [name, check] of checks) {
    try {
      await check();
      console.log(`ok   ${name}`);
    } catch (e) {
      console.log(`FAIL ${name}: ${e.stack || e}`);
      client.close();
      process.exit(1);
    }
  }
  client.close();
})();
