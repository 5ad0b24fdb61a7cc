// Starts and stops a live floodgate for the tests: the binary in
// FLOODGATE_BIN (default build/release/floodgate of the source tree), on
// free loopback ports, with a config in a temporary directory, in clear or
// over TLS with a throwaway CA. Only the processes started here are stopped.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const BIN =
  process.env.FLOODGATE_BIN || path.resolve(HERE, '..', '..', '..', 'build', 'release', 'floodgate');

// The rules every test file uses. sliding_log keeps the figures exact
// whatever the wall clock (no window boundary to straddle).
export const CONFIG = `
rules:
  api: { algorithm: sliding_log, limits: [5/minute] }
  erl: { algorithm: sliding_log, limits: [4/minute] }
  burst: { algorithm: sliding_log, limits: [10/minute] }
  plans: { algorithm: sliding_log, limits: [2/minute], tiers: { pro: [6/minute] } }
  exports: { algorithm: concurrency, max_in_flight: 3, lease_ttl: 30s }
`;

/**
 * A throwaway CA in a temporary directory, made with the openssl CLI: the
 * server's certificate (for 127.0.0.1 and localhost), a client certificate
 * it signed, and a second CA with a client certificate of its own, which
 * floodgate must not trust. Contents are Buffers, paths end in `File`.
 */
export function makeCerts() {
  const dir = mkdtempSync(path.join(tmpdir(), 'floodgate-node-certs-'));
  const file = (name) => path.join(dir, name);
  const openssl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  // 30 days: floodgate warns about a certificate that expires within 14.
  const ca = (name) =>
    openssl('req', '-x509', ...ec, '-keyout', file(`${name}.key`), '-out', file(`${name}.pem`),
      '-days', '30', '-subj', `/CN=floodgate-test-${name}`);
  const leaf = (name, signer, cn, ext) => {
    openssl('req', ...ec, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`),
      '-subj', `/CN=${cn}`);
    const extArgs = [];
    if (ext !== undefined) {
      writeFileSync(file(`${name}.ext`), ext);
      extArgs.push('-extfile', file(`${name}.ext`));
    }
    openssl('x509', '-req', '-in', file(`${name}.csr`), '-CA', file(`${signer}.pem`),
      '-CAkey', file(`${signer}.key`), '-CAcreateserial', '-days', '30', '-out', file(`${name}.pem`),
      ...extArgs);
  };
  ca('ca');
  ca('other-ca');
  leaf('server', 'ca', 'localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  leaf('client', 'ca', 'floodgate-test-client');
  leaf('rogue', 'other-ca', 'floodgate-test-rogue');
  const read = (name) => readFileSync(file(name));
  return {
    dir,
    caFile: file('ca.pem'),
    serverCertFile: file('server.pem'),
    serverKeyFile: file('server.key'),
    ca: read('ca.pem'),
    otherCa: read('other-ca.pem'),
    cert: read('client.pem'),
    key: read('client.key'),
    rogueCert: read('rogue.pem'),
    rogueKey: read('rogue.key'),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A floodgate process; `start()` resolves once it listens. */
export class Floodgate {
  /**
   * `args`: more `serve` arguments (e.g. `['--store', 'redis://…']`).
   * `tls`: `{ certs, requireClientCert }` serves RESP and HTTP over TLS
   * with `certs` (makeCerts()), asking clients for a certificate of that CA.
   */
  constructor(config = CONFIG, args = [], { tls } = {}) {
    this.args = args;
    this.tls = tls;
    this.dir = mkdtempSync(path.join(tmpdir(), 'floodgate-node-client-'));
    this.configPath = path.join(this.dir, 'floodgate.yaml');
    if (tls !== undefined) {
      const { certs, requireClientCert = false } = tls;
      config =
        `tls: { cert_file: ${JSON.stringify(certs.serverCertFile)}, ` +
        `key_file: ${JSON.stringify(certs.serverKeyFile)}, ` +
        `client_ca_file: ${JSON.stringify(certs.caFile)}, ` +
        `require_client_cert: ${requireClientCert} }\n` +
        'listen_tls: { resp: true, http: true }\n' +
        config;
    }
    writeFileSync(this.configPath, config);
    this.proc = null;
    this.respPort = 0;
    this.httpPort = 0;
    this.log = '';
  }

  /** Starts it: on new free ports the first time, on the same ones after. */
  start() {
    const proc = spawn(
      BIN,
      ['serve', '--config', this.configPath, '--resp', `127.0.0.1:${this.respPort}`,
        '--http', `127.0.0.1:${this.httpPort}`, '--grpc', 'off', '--threads', '2', ...this.args],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.proc = proc;
    let log = '';
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`floodgate did not start in 10 s:\n${log}`)), 10000);
      proc.stderr.setEncoding('utf8');
      proc.stderr.on('data', (chunk) => {
        log += chunk;
        this.log += chunk;
        const m = /msg="?listening"? .*\bresp=127\.0\.0\.1:(\d+) .*\bhttp=127\.0\.0\.1:(\d+)/.exec(log);
        if (m) {
          clearTimeout(timer);
          this.respPort = Number(m[1]);
          this.httpPort = Number(m[2]);
          resolve(this);
        }
      });
      proc.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`floodgate exited (${code}):\n${log}`));
      });
      proc.on('error', reject);
    });
  }

  /** Stops the process this object started; resolves when it has exited. */
  stop() {
    const proc = this.proc;
    this.proc = null;
    if (proc === null || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const kill = setTimeout(() => proc.kill('SIGKILL'), 5000);
      proc.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      proc.kill('SIGTERM');
    });
  }

  /** Stops it and removes its directory. */
  async dispose() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** GET on floodgate's own HTTP front (over TLS when it serves TLS): { status, headers, body }. */
  async httpGet(pathAndQuery) {
    if (this.tls === undefined) {
      const res = await fetch(`http://127.0.0.1:${this.httpPort}${pathAndQuery}`);
      return { status: res.status, headers: res.headers, body: await res.json() };
    }
    const { ca, cert, key } = this.tls.certs;
    return new Promise((resolve, reject) => {
      const req = https.get(
        { host: '127.0.0.1', port: this.httpPort, path: pathAndQuery, ca, cert, key, timeout: 5000 },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => {
            // fetch's Headers, as the plaintext path gives.
            const headers = new Headers();
            for (let i = 0; i < res.rawHeaders.length; i += 2) {
              headers.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
            }
            resolve({ status: res.statusCode, headers, body: JSON.parse(text) });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer from ${pathAndQuery} in 5 s`)));
      req.on('error', reject);
    });
  }
}

/** A loopback port nothing listens on (bound, then closed). */
export async function closedPort() {
  const net = await import('node:net');
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A unique subject key per call, so tests sharing a server do not meet. */
let serial = 0;
export function uniqueKey(prefix) {
  serial += 1;
  return `${prefix}:${process.pid}:${Date.now()}:${serial}`;
}
