#!/usr/bin/env bash
# rate-limiter-flexible's RateLimiterRedis against floodgate on the same
# redis-server, from the same Node harness (bench/node/rlflex_vs_floodgate.js:
# ioredis, the same concurrency, keys drawn from the same 100,000 subjects):
#
#   rlflex              RateLimiterRedis({points: 1e9, duration: 60}).consume(key) on redis-server
#   floodgate           FG.CHECK bench key on floodgate --store redis://<that redis-server>
#   floodgate (memory)  FG.CHECK bench key on a second floodgate with the embedded store: the
#                       most this Node client can send, for reference
#
# for several rounds alternating the sides; prints the median requests/s per
# side and floodgate's ratio to rlflex as markdown. Every request must be
# admitted (the limits are far above what a run sends); floodgate's runs must
# also have no backend error (an on_backend_error answer), or the script fails.
#
# usage: bench/rlflex_vs_floodgate.sh [--requests N] [--rounds R] [--concurrency C]
#                                     [--server-cpus LIST] [--client-cpus LIST] (bench/lib.sh, "CPU placement")
#                                     [--procs P] [--threads N]
#   --requests     requests per run (default 300000)
#   --rounds       rounds (default 3)
#   --concurrency  requests in flight, over all processes (default 50, as redis-benchmark -c 50)
#   --procs        Node processes sharing them (default 1)
#   --threads      floodgate event-loop threads (default 1)
#
# Needs Node 20 and the harness's packages: (cd bench/node && npm ci).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

requests=300000
rounds=3
concurrency=50
procs=1
threads=1
while (($#)); do
  case $1 in
    --requests) requests=${2:?--requests needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --concurrency) concurrency=${2:?--concurrency needs a value}; shift 2 ;;
    --procs) procs=${2:?--procs needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
for v in "$requests" "$rounds" "$concurrency" "$procs" "$threads"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || bench_die "--requests, --rounds, --concurrency, --procs and --threads take positive integers"
done

bench_require redis-server redis-cli curl timeout ss node
bench_require_floodgate
node_dir=$BENCH_DIR/node
[[ -d $node_dir/node_modules/rate-limiter-flexible && -d $node_dir/node_modules/ioredis ]] ||
  bench_die "the Node harness's packages are not installed: (cd $node_dir && npm ci)"
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

bench_start_redis
store="redis://127.0.0.1:$REDIS_PORT"
# As in redis_store_vs_script.sh: every answer must be Redis's.
BENCH_FLOODGATE_REDIS_TIMEOUT_MS=${BENCH_FLOODGATE_REDIS_TIMEOUT_MS:-1000}
# floodgate on the embedded store first (its variables are then overwritten
# by the one on the Redis store).
bench_start_floodgate "$threads"
memory_port=$FLOODGATE_RESP_PORT
memory_cmd=$FLOODGATE_CMD
FLOODGATE_MEMORY_PID=$FLOODGATE_PID
bench_start_floodgate "$threads" "$store"

backend_errors() {
  curl -s --max-time 5 "http://127.0.0.1:$FLOODGATE_HTTP_PORT/metrics" |
    awk '$1 == "floodgate_backend_errors_total" { v = $2 } END { printf "%d\n", v }'
}

sides=(rlflex floodgate floodgate-memory)
declare -A rps_runs redis_cpu_us fg_cpu_us
commands_used=()
memory_pid=$FLOODGATE_MEMORY_PID

# CPU ticks (user + system) used so far by pid $1 and its threads.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
clk_tck=$(getconf CLK_TCK)
per_request_us() { awk -v t="$1" -v h="$clk_tck" -v n="$requests" 'BEGIN { printf "%.2f", t / h * 1e6 / n }'; }

run_side() {
  local side=$1 port harness_side out rps errors_before=0 errors_after fg_pid=""
  case $side in
    rlflex) port=$REDIS_PORT; harness_side=rlflex ;;
    floodgate) port=$FLOODGATE_RESP_PORT; harness_side=floodgate; fg_pid=$FLOODGATE_PID ;;
    floodgate-memory) port=$memory_port; harness_side=floodgate; fg_pid=$memory_pid ;;
  esac
  local -a argv=(node "$node_dir/rlflex_vs_floodgate.js" --side "$harness_side" --port "$port"
    --requests "$requests" --concurrency "$concurrency" --procs "$procs" --keys 100000)
  if [[ $round == 1 ]]; then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  timeout 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL >/dev/null
  [[ $side == floodgate ]] && errors_before=$(backend_errors)
  out=$BENCH_TMP/node.json
  # Bounded: at least 5k requests/s or it is killed (the harness also stops itself).
  local limit=$((requests / 5000 + 30)) r0 r1 f0=0 f1=0
  r0=$(cpu_ticks "$REDIS_PID")
  [[ -n $fg_pid ]] && f0=$(cpu_ticks "$fg_pid")
  bench_run "$limit" "$out" "${argv[@]}" --seconds "$((limit - 5))" ||
    bench_die "the Node harness failed: ${argv[*]}"
  r1=$(cpu_ticks "$REDIS_PID")
  [[ -n $fg_pid ]] && f1=$(cpu_ticks "$fg_pid")
  redis_cpu_us[$side]+="$(per_request_us $((r1 - r0))) "
  fg_cpu_us[$side]+="$(per_request_us $((f1 - f0))) "
  if [[ $side == floodgate ]]; then
    errors_after=$(backend_errors)
    ((errors_after == errors_before)) ||
      bench_die "floodgate answered $((errors_after - errors_before)) decisions by on_backend_error: not a valid run"
  fi
  rps=$(sed -n 's/.*"rps":\([0-9]*\).*/\1/p' "$out")
  [[ $rps =~ ^[0-9]+$ ]] || bench_die "no rps in the harness's output: $(cat "$out")"
  rps_runs[$side]+="$rps "
  bench_log "round $round/$rounds: $side: $rps requests/s"
}

bench_log "$rounds rounds x ${#sides[@]} sides, $requests requests each"
for ((round = 1; round <= rounds; round++)); do
  order=("${sides[@]}")
  if ((round % 2 == 0)); then order=(floodgate-memory floodgate rlflex); fi
  for side in "${order[@]}"; do run_side "$side"; done
done

# shellcheck disable=SC2086
rl=$(bench_median ${rps_runs[rlflex]})
echo "## floodgate vs rate-limiter-flexible's RateLimiterRedis ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- node $(node --version), rate-limiter-flexible $(node -p "require('$node_dir/node_modules/rate-limiter-flexible/package.json').version"), ioredis $(node -p "require('$node_dir/node_modules/ioredis/package.json').version")"
echo "- load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- $requests requests per run, $concurrency in flight over $procs Node process(es), 100000 keys; floodgate threads: $threads; $rounds rounds, medians shown"
echo
echo "| side | median rps | vs rlflex | rounds (rps) | redis-server CPU us / request | floodgate CPU us / request |"
echo "|---|---:|---:|---|---:|---:|"
for side in "${sides[@]}"; do
  # shellcheck disable=SC2086
  m=$(bench_median ${rps_runs[$side]})
  runs=""
  for v in ${rps_runs[$side]}; do runs+="$v "; done
  fg="-"
  # shellcheck disable=SC2086
  [[ $side != rlflex ]] && fg=$(bench_median ${fg_cpu_us[$side]})
  # shellcheck disable=SC2086
  echo "| $side | $(bench_fmt_int "$m") | $(bench_ratio "$m" "$rl") | ${runs% } | $(bench_median ${redis_cpu_us[$side]}) | $fg |"
done
echo
echo "CPU us per request: user + system time of the process over the run (/proc/<pid>/stat),"
echo "divided by the requests; the Node harness used the rest of the machine."
echo
echo "Commands:"
echo
echo '```'
echo "$REDIS_CMD"
echo "$FLOODGATE_CMD"
echo "$memory_cmd   # floodgate-memory"
echo "# before each run: redis-cli -h 127.0.0.1 -p $REDIS_PORT FLUSHALL"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
