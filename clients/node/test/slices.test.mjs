// FG.STATE of a rule with quota slices through state(): the fifth element,
// this server's `slices` ({ held, taken }), against a live floodgate on a
// real redis-server (slices need a shared store); a rule without slices has
// none.
//
//   FLOODGATE_BIN=build/release/floodgate node --test clients/node/test/

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

import { closedPort, Floodgate, uniqueKey } from './floodgate.mjs';

const require = createRequire(import.meta.url);
const { createClient } = require('../dist/index.js');

const CONFIG = `
rules:
  fleet: { algorithm: fixed_window, limits: [1600/hour], slices: { max_share: 5% } }
  plain: { algorithm: fixed_window, limits: [1600/hour] }
`;

/** A redis-server on a free port; resolves once it accepts connections. */
async function startRedis() {
  const port = await closedPort();
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no'], { stdio: 'ignore' });
  for (let i = 0; i < 200; i += 1) {
    const up = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (up) return { proc, port };
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill('SIGKILL');
  throw new Error('redis-server did not start');
}

describe('state() of a rule with slices', { timeout: 60000 }, () => {
  let redis;
  let server;
  let fg;

  before(async () => {
    redis = await startRedis();
    server = await new Floodgate(CONFIG, ['--store', `redis://127.0.0.1:${redis.port}`]).start();
    // One connection: one loop, so one slice (each loop holds its own).
    fg = createClient({ host: '127.0.0.1', port: server.respPort, connections: 1 });
  });
  after(async () => {
    await fg.close();
    await server.dispose();
    redis.proc.kill('SIGKILL');
  });

  test('shows the shared count and what this server holds', async () => {
    const key = uniqueKey('fleet');
    for (let i = 0; i < 3; i += 1) assert.equal((await fg.check('fleet', key)).allowed, true);
    const s = await fg.state('fleet', key);
    // A first slice of 80 / 16 = 5 units, 3 of them spent.
    assert.equal(s.limits[0].used, 5);
    assert.deepEqual(s.slices, { held: 2, taken: 5 });
    const plain = await fg.state('plain', key);
    assert.equal(plain.slices, undefined);
  });
});
