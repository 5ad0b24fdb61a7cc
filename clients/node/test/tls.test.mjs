// What only TLS has, against a live floodgate serving RESP over TLS with a
// throwaway CA: the server's certificate and name verified by default and a
// wrong CA refused at once with a message that says so; mutual TLS
// (require_client_cert) refusing a client without a certificate of its CA;
// a TLS client on a plaintext port; the handshake under connectTimeoutMs.
// client.test.mjs runs the promise API's checks over TLS too.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createRequire } from 'node:module';

import { Floodgate, makeCerts, uniqueKey } from './floodgate.mjs';

const require = createRequire(import.meta.url);
const { createClient, FloodgateConnectionError } = require('../dist/index.js');

// Runs `check` on a fresh one-connection client and returns its rejection,
// with how long it took; a client that was admitted fails the test.
async function refusal(options) {
  const fg = createClient({ host: '127.0.0.1', connections: 1, ...options });
  const started = Date.now();
  try {
    const r = await fg.check('api', uniqueKey('refused'));
    assert.fail(`admitted: ${JSON.stringify(r)}`);
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error;
    return { error, took: Date.now() - started };
  } finally {
    await fg.close();
  }
}

// Five admitted then one denied: the connection carried real decisions.
async function fiveThenDenied(fg) {
  const key = uniqueKey('tls');
  const remaining = [];
  for (let i = 0; i < 5; i++) {
    const r = await fg.check('api', key);
    assert.equal(r.allowed, true);
    remaining.push(r.remaining);
  }
  assert.deepEqual(remaining, [4, 3, 2, 1, 0]);
  const denied = await fg.check('api', key);
  assert.equal(denied.allowed, false);
  assert.ok(denied.retryAfterMs > 59000, `retry ${denied.retryAfterMs}`);
}

describe('TLS', { timeout: 60000 }, () => {
  let certs;
  let server;
  let mtls;

  before(async () => {
    certs = makeCerts();
    [server, mtls] = await Promise.all([
      new Floodgate(undefined, [], { tls: { certs } }).start(),
      new Floodgate(undefined, [], { tls: { certs, requireClientCert: true } }).start(),
    ]);
  });

  after(async () => {
    await Promise.all([server?.dispose(), mtls?.dispose()]);
    certs?.dispose();
  });

  test('a CA that did not sign floodgate\'s certificate is refused at once, saying so', async () => {
    for (const tls of [{ ca: certs.otherCa }, true]) {
      // `true`: Node's default CAs, which know nothing of the test CA.
      const { error, took } = await refusal({ port: server.respPort, tls, commandTimeoutMs: 5000 });
      assert.ok(error instanceof FloodgateConnectionError, `${error}`);
      const unverified = ['SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'];
      assert.ok(unverified.includes(error.code), error.code);
      assert.match(
        error.message,
        new RegExp(`^floodgate at 127\\.0\\.0\\.1:${server.respPort}: TLS handshake failed: ` +
          "floodgate's certificate was not accepted: .*is tls\\.ca the CA that signed it"),
      );
      assert.ok(took < 1000, `took ${took} ms`);
    }
  });

  test('the server\'s name is verified: localhost is in its certificate, other names are not', async () => {
    const tls = { ca: certs.ca, servername: 'other.example' };
    const { error } = await refusal({ port: server.respPort, tls });
    assert.equal(error.code, 'ERR_TLS_CERT_ALTNAME_INVALID');
    assert.match(error.message, /certificate was not accepted: .*other\.example/);
    const fg = createClient({ host: 'localhost', port: server.respPort, tls: { ca: certs.ca } });
    try {
      assert.equal((await fg.check('api', uniqueKey('localhost'))).remaining, 4);
    } finally {
      await fg.close();
    }
  });

  test('the options reach tls.connect: rejectUnauthorized: false skips verification', async () => {
    const fg = createClient({ port: server.respPort, tls: { rejectUnauthorized: false } });
    try {
      assert.equal((await fg.check('api', uniqueKey('unverified'))).remaining, 4);
    } finally {
      await fg.close();
    }
  });

  test('require_client_cert: refused without a certificate or with another CA\'s, served with its own', async () => {
    const { ca } = certs;
    const none = await refusal({ port: mtls.respPort, tls: { ca } });
    const rogue = await refusal({ port: mtls.respPort, tls: { ca, cert: certs.rogueCert, key: certs.rogueKey } });
    for (const { error, took } of [none, rogue]) {
      assert.ok(error instanceof FloodgateConnectionError, `${error}`);
      // The alert, or when a reset overtook it, the close before any reply.
      assert.match(error.message, /does it require a client certificate \(tls\.cert, tls\.key\)/);
      assert.ok(took < 1000, `took ${took} ms`);
    }
    const fg = createClient({ port: mtls.respPort, tls: { ca, cert: certs.cert, key: certs.key } });
    try {
      await fiveThenDenied(fg);
      // Over the HTTP front too, with the same certificate.
      const http = await mtls.httpGet(`/v1/check?rule=api&key=${encodeURIComponent(uniqueKey('https'))}`);
      assert.equal(http.status, 200);
      assert.equal(http.body.remaining, 4);
    } finally {
      await fg.close();
    }
  });

  test('a TLS client on a plaintext port is told so; a plaintext one on a TLS port is refused', async () => {
    const plain = await new Floodgate().start();
    try {
      const { error } = await refusal({ port: plain.respPort, tls: { ca: certs.ca } });
      assert.ok(error instanceof FloodgateConnectionError, `${error}`);
      assert.match(error.message, /TLS handshake failed \(wrong version number\): the port does not speak/);
    } finally {
      await plain.dispose();
    }
    const { error, took } = await refusal({ port: server.respPort, commandTimeoutMs: 5000 });
    assert.ok(error instanceof FloodgateConnectionError, `${error}`);
    assert.ok(took < 1000, `took ${took} ms`);
  });

  test('connectTimeoutMs bounds the handshake, not only the TCP connect', async () => {
    // Accepts, then never says a word of TLS.
    const sockets = new Set();
    const mute = net.createServer((s) => sockets.add(s));
    await new Promise((resolve) => mute.listen(0, '127.0.0.1', resolve));
    try {
      const { error, took } = await refusal({
        port: mute.address().port, tls: { ca: certs.ca }, connectTimeoutMs: 300, commandTimeoutMs: 5000,
      });
      assert.ok(error instanceof FloodgateConnectionError, `${error}`);
      assert.equal(error.code, 'ETIMEDOUT');
      assert.ok(took >= 290 && took < 2000, `took ${took} ms`);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => mute.close(resolve));
    }
  });
});
