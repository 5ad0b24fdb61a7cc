#!/usr/bin/env bash
# floodgate's HTTP front against nginx doing a limit_req lookup per request,
# with identical wrk runs (wrk -t1 -c50 -dS --latency):
#
#   floodgate  GET /v1/check?rule=bench&key=key:<random 0..99999>   (a Lua script picks the key)
#   floodgate  GET /v1/check?rule=bench&key=key:1                    (one fixed key)
#   nginx      the same two URLs: limit_req keyed by $arg_key (zone 64m,
#              rate 100000000r/s, burst 1000000 nodelay: never rejects)
#              then empty_gif (see bench/lib.sh for why not "return 204")
#
# Rounds alternate the servers; the table shows medians of requests/s and of
# wrk's p50/p99 latency, and floodgate/nginx.
#
# usage: bench/http_vs_nginx.sh [--threads N] [--duration S] [--rounds R]
#                               [--server-cpus LIST] [--client-cpus LIST] (bench/lib.sh, "CPU placement")
#   --threads   floodgate event-loop threads and nginx worker processes (default 1)
#   --duration  seconds per wrk run (default 10)
#   --rounds    rounds (default 3)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=1
duration=10
rounds=3
while (($#)); do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]*$ && $duration =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] ||
  bench_die "--threads, --duration and --rounds take positive integers"
((duration <= 120)) || bench_die "--duration is at most 120"

bench_require wrk nginx curl timeout ss
bench_require_floodgate
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

bench_start_floodgate "$threads"
bench_start_nginx "$threads"

lua=$BENCH_TMP/random_key.lua
cat >"$lua" <<'EOF'
-- A random key in 0..99999 per request.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/v1/check?rule=bench&key=key:" .. math.random(0, 99999))
end
EOF
path_fixed='/v1/check?rule=bench&key=key:1'

port_of() { if [[ $1 == floodgate ]]; then echo "$FLOODGATE_HTTP_PORT"; else echo "$NGINX_PORT"; fi; }

declare -A rps_runs p50_runs p99_runs err_runs
commands_used=()
failures=0

# run_cell SERVER MODE: one wrk run; MODE is random or fixed.
run_cell() {
  local server=$1 mode=$2 port out key
  port=$(port_of "$server")
  out=$BENCH_TMP/wrk.out
  local -a argv=(wrk -t1 -c50 "-d${duration}s" --latency)
  if [[ $mode == random ]]; then
    argv+=(-s "$lua" "http://127.0.0.1:$port/v1/check?rule=bench&key=key:0")
  else
    argv+=("http://127.0.0.1:$port$path_fixed")
  fi
  if ((round == 1)); then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  if ! bench_run $((duration + 30)) "$out" "${argv[@]}"; then
    bench_die "wrk failed: ${argv[*]}: $(cat "$out")"
  fi
  local rps p50 p99 non2xx sockerr errors
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
  p50=$(awk '$1 == "50%" { print $2 }' "$out")
  p99=$(awk '$1 == "99%" { print $2 }' "$out")
  non2xx=$(awk -F': *' '/Non-2xx or 3xx responses/ { print $2 }' "$out")
  sockerr=$(awk '/Socket errors:/ { n = 0; for (i = 3; i <= NF; i += 2) n += $(i + 1); print n }' "$out" | tr -d ',')
  [[ $rps =~ ^[0-9.]+$ && -n $p50 && -n $p99 ]] || bench_die "cannot read wrk's output: $(cat "$out")"
  errors=$((${non2xx:-0} + ${sockerr:-0}))
  if ((errors > 0)); then
    bench_log "WARNING: $server $mode: $errors errors (non-2xx: ${non2xx:-0}, socket: ${sockerr:-0})"
    failures=$((failures + 1))
  fi
  key="$server|$mode"
  rps_runs[$key]+="$rps "
  p50_runs[$key]+="$(bench_wrk_us "$p50") "
  p99_runs[$key]+="$(bench_wrk_us "$p99") "
  err_runs[$key]=$((${err_runs[$key]:-0} + errors))
  bench_log "round $round/$rounds: $server $mode key: $(bench_fmt_int "$rps") requests/s, p50 $p50, p99 $p99"
}

cells=("floodgate random" "nginx random" "floodgate fixed" "nginx fixed")
bench_log "$rounds rounds x ${#cells[@]} runs of ${duration}s"
for ((round = 1; round <= rounds; round++)); do
  order=("${cells[@]}")
  if ((round % 2 == 0)); then order=("nginx fixed" "floodgate fixed" "nginx random" "floodgate random"); fi
  for cell in "${order[@]}"; do
    # shellcheck disable=SC2086
    run_cell $cell
  done
done

echo "## floodgate HTTP vs nginx limit_req ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- floodgate threads = nginx worker_processes = $threads; wrk -t1 -c50 -d${duration}s --latency; $rounds rounds, medians shown"
echo
echo "| server | key | median rps | floodgate / nginx | p50 (us) | p99 (us) | rounds (rps) | errors |"
echo "|---|---|---:|---:|---:|---:|---|---:|"
for mode in random fixed; do
  # shellcheck disable=SC2086
  nginx_med=$(bench_median ${rps_runs["nginx|$mode"]})
  for server in floodgate nginx; do
    key="$server|$mode"
    # shellcheck disable=SC2086
    med=$(bench_median ${rps_runs[$key]})
    ratio="-"
    [[ $server == floodgate ]] && ratio=$(bench_ratio "$med" "$nginx_med")
    runs=""
    for v in ${rps_runs[$key]}; do runs+="$(bench_fmt_int "$v") "; done
    # shellcheck disable=SC2086
    echo "| $server | $mode | $(bench_fmt_int "$med") | $ratio | $(bench_fmt_int "$(bench_median ${p50_runs[$key]})") | $(bench_fmt_int "$(bench_median ${p99_runs[$key]})") | ${runs% } | ${err_runs[$key]} |"
  done
done
echo
echo "Latencies are wrk's (closed loop: they exclude queueing a fixed-rate client would see; see latency_at_half_peak.sh)."
echo "floodgate answers 200 with a ~250-byte JSON body and RateLimit headers; nginx answers 200 with a 43-byte GIF."
echo "A single wrk thread drives the load; it can be the bottleneck for either server."
echo
echo "Commands:"
echo
echo '```'
echo "$FLOODGATE_CMD"
echo "$NGINX_CMD"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "wrk script ($(basename "$lua")):"
echo
echo '```lua'
cat "$lua"
echo '```'
echo
echo "nginx config:"
echo
echo '```nginx'
cat "$NGINX_CONF"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
if ((failures > 0)); then
  bench_log "$failures run(s) had errors: the numbers above are suspect"
  exit 1
fi
