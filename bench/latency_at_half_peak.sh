#!/usr/bin/env bash
# Latency under a steady load of half the peak, for four servers:
#
#   redis-server  INCR key:<n>                         over RESP
#   floodgate     FG.CHECK bench key:<n>               over RESP
#   floodgate     GET /v1/check?rule=bench&key=key:<n> over HTTP
#   nginx         limit_req + empty_gif, same URL      over HTTP
#
# For each: the peak is found with a short closed-loop run (redis-benchmark
# -c 50 -P 1 for RESP, wrk -t1 -c50 for HTTP, about 5 s), then bench/loadgen
# offers 50% of that peak at a fixed rate for 10 s over 50 connections and
# reports p50/p99/p99.9, measured from each request's scheduled send time
# (coordinated omission corrected). Keys are uniform over 100000.
#
# usage: bench/latency_at_half_peak.sh [--threads N] [--duration S] [--fraction F]
#                                      [--server-cpus LIST] [--client-cpus LIST] (bench/lib.sh, "CPU placement")
#   --threads   floodgate event-loop threads and nginx worker processes (default 1)
#   --duration  seconds of each fixed-rate run (default 10, at most 120)
#   --fraction  share of the peak to offer (default 0.5)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=1
duration=10
fraction=0.5
peak_seconds=5
while (($#)); do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --fraction) fraction=${2:?--fraction needs a value}; shift 2 ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]*$ && $duration =~ ^[1-9][0-9]*$ ]] ||
  bench_die "--threads and --duration take positive integers"
((duration <= 120)) || bench_die "--duration is at most 120"
if ! [[ $fraction =~ ^(0?\.[0-9]+|1(\.0*)?)$ ]] || ! awk -v f="$fraction" 'BEGIN { exit !(f > 0) }'; then
  bench_die "--fraction takes a number in (0, 1]"
fi

bench_require redis-server redis-cli redis-benchmark wrk nginx curl timeout ss
bench_require_floodgate
bench_require_loadgen
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

bench_start_redis server
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

commands_used=()
rows=()
failures=0

# resp_peak PORT CMD...: ~5 s of redis-benchmark -c 50 -P 1; sets PEAK (requests/s).
resp_peak() {
  local port=$1 out=$BENCH_TMP/peak.csv rps n
  shift
  local -a base=(redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -P 1 -r 100000 --csv)
  # A short calibration run sizes -n for about $peak_seconds seconds.
  BENCH_RUN_QUIET='^WARNING: Could not fetch server CONFIG$' bench_run 60 "$out" "${base[@]}" -n 50000 "$@" ||
    bench_die "redis-benchmark failed: $(bench_quote "${base[@]}" -n 50000 "$@")"
  rps=$(awk -F'","' 'NR == 2 { print $2 }' "$out")
  [[ $rps =~ ^[0-9.]+$ ]] || bench_die "no requests/s from redis-benchmark: $(cat "$out")"
  n=$(awk -v r="$rps" -v s="$peak_seconds" 'BEGIN { printf "%d\n", r * s }')
  commands_used+=("$(bench_quote "${base[@]}" -n "$n" "$@")")
  BENCH_RUN_QUIET='^WARNING: Could not fetch server CONFIG$' bench_run 120 "$out" "${base[@]}" -n "$n" "$@" ||
    bench_die "redis-benchmark failed: $(bench_quote "${base[@]}" -n "$n" "$@")"
  rps=$(awk -F'","' 'NR == 2 { print $2 }' "$out")
  [[ $rps =~ ^[0-9.]+$ ]] || bench_die "no requests/s from redis-benchmark: $(cat "$out")"
  PEAK=$rps
}

# http_peak PORT: wrk -t1 -c50 for ~5 s with random keys; sets PEAK (requests/s).
http_peak() {
  local port=$1 out=$BENCH_TMP/peak.wrk rps
  local -a argv=(wrk -t1 -c50 "-d${peak_seconds}s" -s "$lua" "http://127.0.0.1:$port/v1/check?rule=bench&key=key:0")
  commands_used+=("$(bench_quote "${argv[@]}")")
  bench_run $((peak_seconds + 30)) "$out" "${argv[@]}" || bench_die "wrk failed: $(bench_quote "${argv[@]}")"
  if grep -q -e 'Non-2xx' -e 'Socket errors' "$out"; then
    bench_die "wrk saw errors: $(cat "$out")"
  fi
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
  [[ $rps =~ ^[0-9.]+$ ]] || bench_die "no requests/s from wrk: $(cat "$out")"
  PEAK=$rps
}

# measure LABEL PEAK PROTO PORT TEMPLATE: loadgen at fraction x PEAK.
measure() {
  local label=$1 peak=$2 proto=$3 port=$4 template=$5 rate out rc=0
  rate=$(awk -v p="$peak" -v f="$fraction" 'BEGIN { printf "%d\n", p * f }')
  out=$BENCH_TMP/loadgen.out
  local -a argv=("$LOADGEN_BIN" --proto "$proto" --port "$port" --rate "$rate" --duration "$duration"
    --connections 50 --keys 100000 --request "$template")
  commands_used+=("$(bench_quote "${argv[@]}")")
  bench_log "$label: peak $(bench_fmt_int "$peak")/s; offering $rate/s for ${duration}s"
  bench_run $((duration + 30)) "$out" "${argv[@]}" || rc=$?
  local line status=ok
  line=$(grep '^achieved_rps=' "$out" || true)
  [[ -n $line ]] || bench_die "loadgen printed no result (exit $rc)"
  if ((rc != 0)); then
    status="FAIL (see log)"
    failures=$((failures + 1))
  fi
  field() { sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" <<<"$line"; }
  bench_log "$label: $line"
  rows+=("| $label | $(bench_fmt_int "$peak") | $rate | $(bench_fmt_int "$(field achieved_rps)") | $(field p50_us) | $(field p90_us) | $(field p99_us) | $(field p999_us) | $(field max_us) | $(field send_lag_p99_us) | $status |")
}

resp_peak "$REDIS_PORT" INCR key:__rand_int__
timeout 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL >/dev/null
measure "redis-server INCR (RESP)" "$PEAK" resp "$REDIS_PORT" 'INCR {key}'

resp_peak "$FLOODGATE_RESP_PORT" FG.CHECK bench key:__rand_int__
measure "floodgate FG.CHECK bench (RESP)" "$PEAK" resp "$FLOODGATE_RESP_PORT" 'FG.CHECK bench {key}'

http_peak "$FLOODGATE_HTTP_PORT"
measure "floodgate GET /v1/check (HTTP)" "$PEAK" http "$FLOODGATE_HTTP_PORT" '/v1/check?rule=bench&key={key}'

http_peak "$NGINX_PORT"
measure "nginx limit_req + empty_gif (HTTP)" "$PEAK" http "$NGINX_PORT" '/v1/check?rule=bench&key={key}'

pct=$(awk -v f="$fraction" 'BEGIN { printf "%g\n", 100 * f }')
echo "## Latency at ${pct}% of peak ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- floodgate threads = nginx worker_processes = $threads; peak: closed loop, 50 connections, ${peak_seconds} s; then loadgen at ${pct}% of it, ${duration} s, 50 connections, 100000 keys"
echo
echo "| target | peak rps | offered rps | achieved rps | p50 (us) | p90 (us) | p99 (us) | p99.9 (us) | max (us) | loadgen send lag p99 (us) | status |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Latency runs from each request's scheduled send time to its reply (coordinated omission corrected)."
echo "\"send lag\" is how late loadgen itself sent requests; it is part of the latency, and large values mean the"
echo "load generator, not the server, was short of CPU."
echo
echo "Commands:"
echo
echo '```'
echo "$REDIS_CMD"
echo "$FLOODGATE_CMD"
echo "$NGINX_CMD"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
if ((failures > 0)); then
  bench_log "$failures loadgen run(s) failed: see the messages above"
  exit 1
fi
