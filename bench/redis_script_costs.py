#!/usr/bin/env python3
"""What a decision costs Redis inside floodgate's batched script, step by step.

Each row is a Lua script run by EVALSHA on the redis-server at --port with
--keys keys per call (floodgate's batches hold ~100 decisions at -P 16),
timed by Redis itself (INFO commandstats: microseconds inside EVALSHA, so
the client and the network are not in it), --calls calls, median of
--repeats. Per-decision figures are the call's time over its keys; the
"alone" column subtracts the row "keys passed, nothing done" (what passing
a key to a script and back costs). Run by bench/redis_script_costs.sh, which
starts and pins the redis-server.
"""
import argparse
import os
import re
import statistics
import struct
import sys

import redis

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src', 'redis', 'scripts')


def load_script(name):
    """src/redis/scripts/<name>.lua with its includes pasted, as cmake/embed_lua.cmake does."""
    with open(os.path.join(SCRIPTS, name + '.lua')) as f:
        text = f.read()

    def paste(m):
        with open(os.path.join(SCRIPTS, 'include', m.group(1).strip())) as inc:
            return inc.read()
    return re.sub(r'^--! include ([^\n]*)\n?', paste, text, flags=re.M)


def loop(body):
    return 'local k = #KEYS\nlocal r = {}\n' + body + '\nreturn r'


REPLY = "struct.pack('<dddddddd', 1, 1, 1e9, 5, 0, 5, 0, 6)"  # one decision's packed reply
FP = '0123456789abcdef'  # the rule's definition fingerprint (ARGV[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--keys', type=int, default=100)
    ap.add_argument('--calls', type=int, default=2000)
    ap.add_argument('--repeats', type=int, default=3)
    a = ap.parse_args()
    r = redis.Redis(host='127.0.0.1', port=a.port)
    K = a.keys
    nkeys = 20000
    names = ['fg:{bench:key:%012d}' % i for i in range(nkeys)]
    # Calls of K distinct keys, spread over the keyspace as a busy server's are.
    batch = lambda c: [names[(c * 7919 + j * 211) % nkeys] for j in range(K)]
    fresh = lambda c: ['fg:{bench:new:%d:%d}' % (c, j) for j in range(K)]
    fw = load_script('fixed_window')
    argv = [FP, '', '1', '1000000000', '60000', '0', '0', '0', '0', '1']
    seed = ('local c = redis.call("INCR", KEYS[1]) if c == 1 then '
            'redis.call("EXPIRE", KEYS[1], ARGV[1]) end return c')

    def prefill(script, args):  # every key holds the script's state for now
        sha = r.script_load(script)
        for i in range(0, nkeys, K):
            reply = r.evalsha(sha, len(names[i:i + K]), *names[i:i + K], *args)
            # Each element packs its decision as doubles, `admitted` first:
            # a run that denies or errs measures something else.
            if not all(isinstance(e, bytes) and struct.unpack_from('<d', e)[0] == 1 for e in reply[1:]):
                sys.exit('redis_script_costs: a prefill decision was not an admission: %r' % reply[1:3])

    # Median ns per decision of `script` over `keys_of(c)` (k keys) and
    # `args`; `state`: the (script, args) whose states the keys hold first,
    # or None for an empty keyspace.
    def run(script, keys_of, args, k, state):
        sha = r.script_load(script)
        got = []
        for _ in range(a.repeats):
            r.flushall()
            if state:
                prefill(*state)
            r.config_resetstat()
            p = r.pipeline(transaction=False)
            for c in range(a.calls):
                p.evalsha(sha, k, *keys_of(c), *args)
                if c % 50 == 49:
                    p.execute()
            p.execute()
            st = r.info('commandstats')['cmdstat_evalsha']
            got.append(st['usec'] * 1000.0 / (st['calls'] * k))
        return statistics.median(got)

    held = (fw, argv)  # keys holding this window's fixed_window state
    rows = [  # (name, script, the keys' state first: held or None)
        ('+ a 64-byte packed reply per decision', loop('for j = 1, k do r[j] = %s end' % REPLY), None),
        ("+ GET of the key's state", loop("for j = 1, k do local v = redis.call('GET', KEYS[j]) end"), held),
        ("+ GET by redis.pcall (how the scripts read since 265eb53: a wrong-type key answered)",
         loop("for j = 1, k do local v = redis.pcall('GET', KEYS[j]) end"), held),
        ('+ MGET of all keys, once per call', loop("local v = redis.call('MGET', unpack(KEYS))"), held),
        ('+ SETRANGE of 24 bytes (same window: the common write)',
         loop("for j = 1, k do redis.call('SETRANGE', KEYS[j], '18', 'abcdefghabcdefghabcdefgh') end"), held),
        ('+ SET PX of the state (a new window)',
         loop("for j = 1, k do redis.call('SET', KEYS[j], 'abcdefghabcdefghabcdefghabcdefghabcdefghab', 'PX', '60000') end"),
         held),
        ('+ INCR (the seed\'s command)', loop("for j = 1, k do redis.call('INCR', 'c' .. KEYS[j]) end"), None),
        ('+ the state unpacked and packed (Lua only)',
         loop("local s = struct.pack('<ddd', 1, 2, 3) for j = 1, k do local x, y, z = struct.unpack('<ddd', s, 1) "
              "local v = struct.pack('<ddd', x, y, z + 1) end"), None),
        ('floodgate fixed_window, keys holding this window', fw, held),
    ]
    print('| step (%d decisions per call) | ns / decision | alone |' % K)
    print('|---|---:|---:|')
    base = run(loop(''), batch, argv, K, None)
    print('| keys passed, nothing done (`return r`) | %.0f | - |' % base)
    for name, script, state in rows:
        ns = run(script, batch, argv, K, state)
        print('| %s | %.0f | %.0f |' % (name, ns, ns - base))
    ns = run(fw, fresh, argv, K, None)
    print('| floodgate fixed_window, new keys | %.0f | %.0f |' % (ns, ns - base))
    seed_ns = run(seed, lambda c: [names[(c * 7919) % nkeys]], ['60'], 1, None)
    print('| the seed script, one decision per EVALSHA | %.0f | - |' % seed_ns)

    # Every algorithm, one limit and three, on keys holding their state (a
    # count no run reaches, so every decision is an admission and a write).
    minute, hour, day = 60000, 3600000, 86400000
    shapes = {  # ARGV fields per limit, for a limit of `count` per `period`
        'fixed_window': lambda count, period: [count, period, 0, 0, 0, 0],
        'sliding_window': lambda count, period: [count, period],
        'sliding_log': lambda count, period: [count, period],
        'token_bucket': lambda count, period: [count, period, count],
        'gcra': lambda count, period: [period * 1000 // count, count],
    }
    print()
    print('| script (%d decisions per call, keys holding state) | 1 limit, ns / decision | '
          '3 limits (minute, hour, day), ns / decision | vs the seed script, 1 limit |' % K)
    print('|---|---:|---:|---:|')
    for name, fields in shapes.items():
        script = load_script(name)
        cells = []
        for periods in ([minute], [minute, hour, day]):
            count = 10 ** 6
            args = [FP, '', str(len(periods))]
            for period in periods:
                args += [str(f) for f in fields(count * period // minute, period)]
            args.append('1')
            cells.append(run(script, batch, args, K, (script, args)))
        print('| %s | %.0f | %.0f | %.2f |' % (name, cells[0], cells[1], cells[0] / seed_ns))
    return 0


if __name__ == '__main__':
    sys.exit(main())
