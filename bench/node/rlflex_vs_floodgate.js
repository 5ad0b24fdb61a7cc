// One side of the rate-limiter-flexible comparison, from one Node process:
//
//   --side rlflex     RateLimiterRedis.consume(key) on redis-server (ioredis)
//   --side floodgate  FG.CHECK <rule> <key> on floodgate's RESP port (ioredis)
//
// Both sides run the same loop: --concurrency workers, each awaiting one
// request at a time, keys drawn uniformly from --keys subjects ("key:<n>",
// as redis-benchmark's -r), until --requests requests have completed or
// --seconds have passed (then it fails). With --procs P > 1 the requests and
// workers are split over P processes (one Node process is one CPU at most),
// each with its own connection, started together once all are connected.
// The limit is far above what a run sends, so every request must be
// admitted; a rejection or an error fails the run. Prints one JSON line:
// side, procs, requests, seconds (from the common start to the last
// process's end), rps, admitted.
//
// usage: node rlflex_vs_floodgate.js --side rlflex|floodgate --port P
//          [--requests N] [--concurrency C] [--procs P] [--keys K] [--rule R]
//          [--auto-pipelining 0|1] [--seconds S]
'use strict';

const { fork } = require('child_process');
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

function parseArgs(argv) {
  const opts = {
    side: '',
    port: 0,
    requests: 200000,
    concurrency: 50,
    procs: 1,
    keys: 100000,
    rule: 'bench',
    autoPipelining: 1,
    seconds: 120,
  };
  const names = {
    '--side': 'side',
    '--port': 'port',
    '--requests': 'requests',
    '--concurrency': 'concurrency',
    '--procs': 'procs',
    '--keys': 'keys',
    '--rule': 'rule',
    '--auto-pipelining': 'autoPipelining',
    '--seconds': 'seconds',
  };
  for (let i = 2; i < argv.length; i += 2) {
    const name = names[argv[i]];
    if (!name || i + 1 >= argv.length) throw new Error(`bad argument: ${argv[i]}`);
    opts[name] = typeof opts[name] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (opts.side !== 'rlflex' && opts.side !== 'floodgate') throw new Error('--side rlflex|floodgate');
  for (const k of ['port', 'requests', 'concurrency', 'procs', 'keys', 'seconds']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new Error(`--${k} must be a positive integer`);
  }
  return opts;
}

// Connects, warms up, then waits for `go` before timing `requests`
// requests over `concurrency` workers. Resolves with the elapsed seconds
// and the admissions.
async function runOne(opts, requests, concurrency, waitForGo) {
  // Loopback only: the servers this harness measures run on this machine.
  const client = new Redis({
    host: '127.0.0.1',
    port: opts.port,
    enableAutoPipelining: opts.autoPipelining === 1,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
  });
  await client.connect();

  let decide;
  if (opts.side === 'rlflex') {
    // Never denies within a run: measures the cost of a decision, as the
    // floodgate rule (1e9/minute) does.
    const limiter = new RateLimiterRedis({
      storeClient: client,
      keyPrefix: 'rlflx',
      points: 1e9,
      duration: 60,
    });
    decide = async (key) => {
      await limiter.consume(key); // rejects (throws) when over the limit
      return true;
    };
  } else {
    decide = async (key) => {
      const reply = await client.call('FG.CHECK', opts.rule, key);
      return Array.isArray(reply) && reply[0] === 1;
    };
  }
  // One warm-up request (connection, script load), not counted.
  if (!(await decide('key:warmup'))) throw new Error('the warm-up request was not admitted');
  await waitForGo();

  let started = 0;
  let admitted = 0;
  const t0 = process.hrtime.bigint();
  async function worker() {
    while (started < requests) {
      started++;
      const key = 'key:' + Math.floor(Math.random() * opts.keys);
      if (await decide(key)) admitted++;
    }
  }
  const workers = [];
  for (let i = 0; i < concurrency; i++) workers.push(worker());
  await Promise.all(workers);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  client.disconnect();
  return { seconds, admitted };
}

// A child of a --procs run: its share, started on the parent's word.
async function child(opts) {
  const go = new Promise((resolve) => process.once('message', resolve));
  const r = await runOne(opts, opts.requests, opts.concurrency, () => {
    process.send({ ready: true });
    return go;
  });
  process.send({ done: r });
  process.disconnect();
}

async function main() {
  const opts = parseArgs(process.argv);
  if (process.env.FG_BENCH_CHILD === '1') return child(opts);
  const deadline = setTimeout(() => {
    console.error(`not done within ${opts.seconds} s`);
    process.exit(3);
  }, opts.seconds * 1000);

  let seconds = 0;
  let admitted = 0;
  if (opts.procs === 1) {
    const r = await runOne(opts, opts.requests, opts.concurrency, async () => {});
    seconds = r.seconds;
    admitted = r.admitted;
  } else {
    const kids = [];
    for (let i = 0; i < opts.procs; i++) {
      // Shares differ by at most one request (and one worker).
      const share = (n) => Math.floor(n / opts.procs) + (i < n % opts.procs ? 1 : 0);
      const args = process.argv.slice(2).concat([
        '--procs', '1', '--requests', String(share(opts.requests)),
        '--concurrency', String(Math.max(1, share(opts.concurrency))),
      ]);
      kids.push(fork(__filename, args, { env: { ...process.env, FG_BENCH_CHILD: '1' } }));
    }
    const when = (kid, key) =>
      new Promise((resolve, reject) => {
        kid.on('message', (m) => { if (m[key] !== undefined) resolve(m[key]); });
        kid.on('exit', (code) => reject(new Error(`a worker process exited with ${code}`)));
      });
    const done = kids.map((kid) => when(kid, 'done'));
    await Promise.all(kids.map((kid) => when(kid, 'ready')));
    const t0 = process.hrtime.bigint();
    for (const kid of kids) kid.send('go');
    const results = await Promise.all(done);
    seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    for (const r of results) admitted += r.admitted;
  }
  clearTimeout(deadline);
  console.log(
    JSON.stringify({
      side: opts.side,
      procs: opts.procs,
      requests: opts.requests,
      seconds: Number(seconds.toFixed(3)),
      rps: Math.round(opts.requests / seconds),
      admitted,
    }),
  );
  if (admitted !== opts.requests) {
    console.error(`${opts.requests - admitted} requests were not admitted`);
    process.exit(4);
  }
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(2);
});
