#!/usr/bin/env bash
# Acquire+release pairs per second of a concurrency rule: floodgate's leases
# on the embedded store and on a real redis-server, against the hand-rolled
# INCR/EXPIRE/DECR Lua pair on the same redis-server (bench/lease_bench.cc
# has the cells), at 1 and 8 client threads, blocking calls (one pair after
# another per thread). Prints the table as markdown with the machine and the
# command.
#
# usage: bench/leases_vs_incr.sh [--min-time S]   (Google Benchmark's min time per cell, default 2)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

min_time=2
while (($#)); do
  case $1 in
    --min-time) min_time=${2:?--min-time needs a value}; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done

bench=${LEASE_BENCH_BIN:-build/release/bench/lease_bench}
[[ -x $bench ]] || bench_die "$bench is not built (cmake --build --preset release)"
bench_init
facts=$(bench_machine_facts)
bench_start_redis
json=$BENCH_TMP/lease_bench.json
FLOODGATE_BENCH_REDIS_PORT=$REDIS_PORT "$bench" --benchmark_min_time="$min_time" \
  --benchmark_format=json >"$json"

echo "$facts"
echo
echo "| cell | threads | pairs/s |"
echo "|---|---|---|"
python3 - "$json" <<'PY'
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    name, _, threads = b["name"].partition("/threads:")
    name = name.split("/")[0]
    print(f"| {name} | {threads or 1} | {b.get('items_per_second', 0):,.0f} |")
PY
echo
echo "command: \`bench/leases_vs_incr.sh --min-time $min_time\`"
