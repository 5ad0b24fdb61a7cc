#!/usr/bin/env bash
# Envoy's RateLimitService (gRPC ShouldRateLimit) against the RESP front,
# deciding the same thing: one floodgate server whose envoy_ratelimit file
# has the domain "bench" with a descriptor `user` limited to 1e9/minute
# (never denies). A ShouldRateLimit call with the descriptor (user, key:<n>)
# is decided by the rule "envoy:fixed_window:1000000000/minute" for the
# subject "bench|user=key:<n>"; FG.CHECK on the RESP front names that rule
# and subject, so both fronts make the very same decisions on the same state.
#
#   gRPC  rls_loadgen --concurrency C --channels 2 --duration S   (1 descriptor)
#   gRPC  the same with 2 descriptors per call (user and user1, both counted:
#         a check round, then a count round)
#   RESP  redis-benchmark -c C -r 100000 -n N FG.CHECK envoy:fixed_window:1000000000/minute
#         'bench|user=key:__rand_int__'
#
# All closed loop with C calls in flight (C connections of one call each
# for redis-benchmark; C calls over 2 HTTP/2 connections for gRPC, as Envoy
# multiplexes), keys uniform over 100,000; several rounds alternating the
# cells; prints a markdown table of medians (requests/s, p99, and
# floodgate's CPU time per call: every thread, bench/lib.sh "CPU placement").
#
# With --store redis, the state lives in a redis-server this script starts,
# and each cell also shows how many decisions one script call carried:
# decisions made (1 per RESP request or one-descriptor call; 4 per
# two-descriptor call, a check round then a count round) over the EVALSHA
# and EVAL calls Redis counted (INFO commandstats, reset before each run).
#
# usage: bench/rls_vs_resp.sh [--threads N] [--duration S] [--rounds R] [--concurrency C]
#                             [--store memory|redis] [--server-cpus LIST] [--client-cpus LIST]
#   --threads      floodgate event-loop threads, and as many gRPC threads
#                  (default 0: floodgate's own default, as a user gets it)
#   --duration     seconds per gRPC run (default 10); RESP runs send as many
#                  requests as the previous gRPC round answered, at least 300000
#   --rounds       rounds (default 3)
#   --concurrency  calls in flight (default 50)
#   --store        memory (default) or redis
#   --server-cpus, --client-cpus  where floodgate, and the load tools (with
#                  a redis-server store), run (on a 2-core host:
#                  --server-cpus 0 --client-cpus 1)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=0
store=memory
duration=10
rounds=3
concurrency=50
while (($#)); do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --concurrency) concurrency=${2:?--concurrency needs a value}; shift 2 ;;
    --store) store=${2:?--store needs a value}; shift 2 ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
[[ $threads =~ ^[0-9]+$ && $duration =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ &&
  $concurrency =~ ^[1-9][0-9]*$ ]] || bench_die "options take positive integers"
((duration <= 120)) || bench_die "--duration is at most 120"
[[ $store == memory || $store == redis ]] || bench_die "--store is memory or redis"

bench_require redis-cli redis-benchmark curl timeout ss
bench_require_floodgate
[[ -x $RLS_LOADGEN_BIN ]] || bench_die "no rls_loadgen at $RLS_LOADGEN_BIN; build it with:
  $BENCH_BUILD_CMD
(or set RLS_LOADGEN_BIN)"
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

cat >"$BENCH_TMP/ratelimit.yaml" <<'EOF'
domain: bench
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
  - key: user1
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
EOF
BENCH_FLOODGATE_EXTRA_CONFIG="envoy_ratelimit: [$BENCH_TMP/ratelimit.yaml]"
BENCH_FLOODGATE_GRPC=1
store_url=""
if [[ $store == redis ]]; then
  bench_start_redis
  store_url=redis://127.0.0.1:$REDIS_PORT
fi
bench_start_floodgate "$threads" "$store_url"
threads_used=$(sed -n 's/.* threads=\([0-9][0-9]*\).*/\1/p' "$BENCH_TMP/floodgate.log" | head -n 1)
[[ -n $FLOODGATE_GRPC_PORT ]] || bench_die "floodgate did not start its gRPC front"
bench_wait_tcp "$FLOODGATE_GRPC_PORT" 5 "$FLOODGATE_PID" || bench_die "gRPC port not reachable"

rule='envoy:fixed_window:1000000000/minute'
resp_cmd=(FG.CHECK "$rule" 'bench|user=key:__rand_int__')
# Both fronts must agree before anything is timed: the same subject
# checked through each shows one count more each time.
probe=$(timeout 10 redis-cli -p "$FLOODGATE_RESP_PORT" FG.CHECK "$rule" 'bench|user=key:probe' | sed -n 3p)
[[ $probe == 999999999 ]] || bench_die "FG.CHECK probe answered remaining=$probe"

declare -A rps_runs p99_runs per_call_runs cpu_runs  # cell -> space-separated values per round
commands_used=()
grpc_answered=300000

# Redis only: forget the script call counts before a run; after it, add
# "decisions per script call" to the cell's rounds.
reset_script_calls() {
  [[ $store == redis ]] || return 0
  timeout 10 redis-cli -p "$REDIS_PORT" CONFIG RESETSTAT >/dev/null
}
note_script_calls() {
  local cell=$1 decisions=$2 calls
  [[ $store == redis ]] || return 0
  calls=$(timeout 10 redis-cli -p "$REDIS_PORT" INFO commandstats |
    awk -F'[:=,]' '/^cmdstat_eval(sha)?:/ { n += $3 } END { print n + 0 }')
  per_call_runs[$cell]+="$(awk -v d="$decisions" -v c="$calls" 'BEGIN { printf "%.1f", c ? d / c : 0 }') "
}

run_grpc() {
  local cell=$1 descriptors=$2 out=$BENCH_TMP/rls.out line rps p99
  local -a argv=("$RLS_LOADGEN_BIN" --port "$FLOODGATE_GRPC_PORT" --concurrency "$concurrency"
    --channels 2 --duration "$duration" --descriptors "$descriptors")
  if [[ $round == 1 ]]; then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  reset_script_calls
  local cpu0 cpu1 completed
  cpu0=$(bench_cpu_ns "$FLOODGATE_PID")
  bench_run $((duration + 30)) "$out" "${argv[@]}" || bench_die "rls_loadgen failed: $(cat "$out")"
  cpu1=$(bench_cpu_ns "$FLOODGATE_PID")
  line=$(tail -n 1 "$out")
  completed=$(sed -n 's/.*completed=\([0-9]*\).*/\1/p' <<<"$line")
  cpu_runs[$cell]+="$(bench_per ns $((cpu1 - cpu0)) "${completed:-0}") "
  note_script_calls "$cell" "$(sed -n 's/.*completed=\([0-9]*\).*/\1/p' <<<"$line" |
    awk -v d="$descriptors" '{ print $1 * (d == 1 ? 1 : 2 * d) }')"
  rps=$(sed -n 's/.*achieved_rps=\([0-9.]*\).*/\1/p' <<<"$line")
  p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$line")
  [[ -n $rps && -n $p99 ]] || bench_die "no figures in: $line"
  if ((descriptors == 1)); then
    grpc_answered=$(awk -v r="$rps" -v d="$duration" 'BEGIN { n = int(r * d); print (n < 300000 ? 300000 : n) }')
  fi
  rps_runs[$cell]+="$rps "
  p99_runs[$cell]+="$p99 "
  bench_log "round $round/$rounds: $cell: $(bench_fmt_int "$rps") calls/s, p99 $p99 us"
}

run_resp() {
  local cell=$1 out=$BENCH_TMP/rb.csv line rps p99
  local -a argv=(redis-benchmark -h 127.0.0.1 -p "$FLOODGATE_RESP_PORT" -c "$concurrency"
    -r 100000 -n "$grpc_answered" --csv "${resp_cmd[@]}")
  if [[ $round == 1 ]]; then commands_used+=("$(bench_quote "${argv[@]}")   # -n: the gRPC run's count"); fi
  reset_script_calls
  local cpu0 cpu1
  cpu0=$(bench_cpu_ns "$FLOODGATE_PID")
  BENCH_RUN_QUIET='^WARNING: Could not fetch server CONFIG$' \
    bench_run $((grpc_answered / 20000 + 30)) "$out" "${argv[@]}" ||
    bench_die "redis-benchmark failed"
  cpu1=$(bench_cpu_ns "$FLOODGATE_PID")
  cpu_runs[$cell]+="$(bench_per ns $((cpu1 - cpu0)) "$grpc_answered") "
  note_script_calls "$cell" "$grpc_answered"
  line=$(grep -F '"FG.CHECK' "$out" | tail -n 1)
  rps=$(awk -F'","' '{ print $2 }' <<<"$line")
  p99=$(awk -F'","' '{ gsub(/"/, "", $7); printf "%.0f\n", $7 * 1000 }' <<<"$line")
  [[ $rps =~ ^[0-9.]+$ && $p99 =~ ^[0-9]+$ ]] || bench_die "no figures in: $(cat "$out")"
  rps_runs[$cell]+="$rps "
  p99_runs[$cell]+="$p99 "
  bench_log "round $round/$rounds: $cell: $(bench_fmt_int "$rps") requests/s, p99 $p99 us"
}

cells=("gRPC ShouldRateLimit, 1 descriptor" "RESP FG.CHECK, same rule and subjects"
  "gRPC ShouldRateLimit, 2 descriptors")
bench_log "$rounds rounds, ${duration} s gRPC runs, $concurrency in flight"
for ((round = 1; round <= rounds; round++)); do
  if ((round % 2 == 1)); then
    run_grpc "${cells[0]}" 1
    run_resp "${cells[1]}"
    run_grpc "${cells[2]}" 2
  else
    run_grpc "${cells[2]}" 2
    run_grpc "${cells[0]}" 1
    run_resp "${cells[1]}"
  fi
done

echo "## Envoy RateLimitService (gRPC) vs RESP, same decisions ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- $(bench_cpu_placement)"
echo "- store: $store; floodgate event-loop threads: ${threads_used:-?} (--threads $threads), and as many gRPC threads; $concurrency calls in flight; $rounds rounds, medians"
echo
per_call_head="" per_call_rule=""
if [[ $store == redis ]]; then
  per_call_head=" decisions per script call (rounds) |"
  per_call_rule="---|"
fi
echo "| front | floodgate CPU us / call | CPU vs RESP | rounds (CPU us) | median calls/s | vs RESP | median p99 (us) | rounds (calls/s) | rounds (p99 us) |$per_call_head"
echo "|---|---:|---:|---|---:|---:|---:|---|---|$per_call_rule"
# shellcheck disable=SC2086
resp_med=$(bench_median ${rps_runs[${cells[1]}]})
# shellcheck disable=SC2086
resp_cpu=$(bench_median ${cpu_runs[${cells[1]}]})
for cell in "${cells[@]}"; do
  # shellcheck disable=SC2086
  med=$(bench_median ${rps_runs[$cell]})
  # shellcheck disable=SC2086
  p99=$(bench_median ${p99_runs[$cell]})
  runs=""
  for v in ${rps_runs[$cell]}; do runs+="$(bench_fmt_int "$v") "; done
  per_call=""
  if [[ $store == redis ]]; then per_call=" ${per_call_runs[$cell]% } |"; fi
  # shellcheck disable=SC2086
  cpu=$(bench_median ${cpu_runs[$cell]})
  echo "| $cell | $cpu | $(bench_ratio "$cpu" "$resp_cpu") | ${cpu_runs[$cell]% } | $(bench_fmt_int "$med") | $(bench_ratio "$med" "$resp_med") | $(bench_fmt_int "$p99") | ${runs% } | ${p99_runs[$cell]% } |$per_call"
done
echo
echo "Commands:"
echo
echo '```'
if [[ $store == redis ]]; then echo "$REDIS_CMD"; fi
echo "$FLOODGATE_CMD"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "floodgate config and Envoy file:"
echo
echo '```yaml'
grep -v '^#' "$FLOODGATE_CONFIG"
echo "---"
cat "$BENCH_TMP/ratelimit.yaml"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
