// Starts and stops a live floodgate for the tests: the binary in
// FLOODGATE_BIN (default build/release/floodgate of the source tree), on
// free loopback ports, with a config in a temporary directory. Only the
// processes started here are stopped.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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

/** A floodgate process; `start()` resolves once it listens. */
export class Floodgate {
  /** `args`: more `serve` arguments (e.g. `['--store', 'redis://…']`). */
  constructor(config = CONFIG, args = []) {
    this.args = args;
    this.dir = mkdtempSync(path.join(tmpdir(), 'floodgate-node-client-'));
    this.configPath = path.join(this.dir, 'floodgate.yaml');
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

  /** GET on floodgate's own HTTP front: { status, headers, body }. */
  async httpGet(pathAndQuery) {
    const res = await fetch(`http://127.0.0.1:${this.httpPort}${pathAndQuery}`);
    return { status: res.status, headers: res.headers, body: await res.json() };
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
