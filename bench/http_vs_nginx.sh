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
# Rounds alternate the servers; the table shows medians of requests/s, of
# each server's CPU time per request (all its threads; nginx: the master and
# its workers; over the requests wrk counted) and of wrk's p50/p99 latency,
# and floodgate/nginx.
#
# With --https, both serve HTTPS with the same throwaway certificate (EC
# P-256, made at start; floodgate: tls and listen_tls in its config, nginx:
# "listen ... ssl", TLS 1.2 and 1.3 as floodgate) and wrk uses https://.
# wrk keeps its 50 connections open: 50 handshakes a run, not counted apart.
#
# usage: bench/http_vs_nginx.sh [--threads N] [--duration S] [--rounds R] [--https]
#                               [--server-cpus LIST] [--client-cpus LIST] (bench/lib.sh, "CPU placement")
#   --threads   floodgate event-loop threads and nginx worker processes (default 1)
#   --duration  seconds per wrk run (default 10)
#   --rounds    rounds (default 3)
#   --https     both servers over TLS (default: plaintext HTTP)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=1
duration=10
rounds=3
https=0
while (($#)); do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --https) https=1; shift ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]*$ && $duration =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] ||
  bench_die "--threads, --duration and --rounds take positive integers"
((duration <= 120)) || bench_die "--duration is at most 120"

bench_require wrk nginx curl timeout ss
if ((https)); then bench_require openssl; fi
bench_require_floodgate
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

if ((https)); then bench_make_tls_cert; fi
BENCH_FLOODGATE_TLS=$https bench_start_floodgate "$threads"
BENCH_NGINX_TLS=$https bench_start_nginx "$threads"
if ((https)); then
  fg_session=$(bench_tls_session "127.0.0.1:$FLOODGATE_HTTP_PORT")
  nginx_session=$(bench_tls_session "127.0.0.1:$NGINX_PORT")
  [[ $fg_session == TLS* && $nginx_session == TLS* ]] ||
    bench_die "no TLS session: floodgate $fg_session, nginx $nginx_session"
fi

lua=$BENCH_TMP/random_key.lua
cat >"$lua" <<'EOF'
-- A random key in 0..99999 per request.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/v1/check?rule=bench&key=key:" .. math.random(0, 99999))
end
EOF
path_fixed='/v1/check?rule=bench&key=key:1'

url_of() { if [[ $1 == floodgate ]]; then echo "$FLOODGATE_HTTP_URL"; else echo "$NGINX_URL"; fi; }
# CPU nanoseconds the server has spent so far, all its threads (nginx: the
# master and its workers).
cpu_of() { if [[ $1 == floodgate ]]; then bench_cpu_ns "$FLOODGATE_PID"; else bench_cpu_ns_tree "$NGINX_PID"; fi; }

declare -A rps_runs p50_runs p99_runs err_runs cpu_runs
commands_used=()
failures=0

# run_cell SERVER MODE: one wrk run; MODE is random or fixed.
run_cell() {
  local server=$1 mode=$2 url out key cpu0 cpu1
  url=$(url_of "$server")
  out=$BENCH_TMP/wrk.out
  local -a argv=(wrk -t1 -c50 "-d${duration}s" --latency)
  if [[ $mode == random ]]; then
    argv+=(-s "$lua" "$url/v1/check?rule=bench&key=key:0")
  else
    argv+=("$url$path_fixed")
  fi
  if ((round == 1)); then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  cpu0=$(cpu_of "$server")
  if ! bench_run $((duration + 30)) "$out" "${argv[@]}"; then
    bench_die "wrk failed: ${argv[*]}: $(cat "$out")"
  fi
  cpu1=$(cpu_of "$server")
  local rps p50 p99 non2xx sockerr errors requests
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
  requests=$(awk '$2 == "requests" && $3 == "in" { print $1 }' "$out")
  p50=$(awk '$1 == "50%" { print $2 }' "$out")
  p99=$(awk '$1 == "99%" { print $2 }' "$out")
  non2xx=$(awk -F': *' '/Non-2xx or 3xx responses/ { print $2 }' "$out")
  sockerr=$(awk '/Socket errors:/ { n = 0; for (i = 3; i <= NF; i += 2) n += $(i + 1); print n }' "$out" | tr -d ',')
  [[ $rps =~ ^[0-9.]+$ && $requests =~ ^[0-9]+$ && -n $p50 && -n $p99 ]] ||
    bench_die "cannot read wrk's output: $(cat "$out")"
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
  cpu_runs[$key]+="$(bench_per ns $((cpu1 - cpu0)) "$requests") "
  bench_log "round $round/$rounds: $server $mode key: $(bench_fmt_int "$rps") requests/s, $(bench_per ns $((cpu1 - cpu0)) "$requests") us CPU per request, p50 $p50, p99 $p99"
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

if ((https)); then
  echo "## floodgate HTTPS vs nginx limit_req over HTTPS ($(date -u +%Y-%m-%d))"
else
  echo "## floodgate HTTP vs nginx limit_req ($(date -u +%Y-%m-%d))"
fi
echo
echo "$facts"
echo "- $(bench_cpu_placement)"
echo "- floodgate threads = nginx worker_processes = $threads; wrk -t1 -c50 -d${duration}s --latency; $rounds rounds, medians shown"
if ((https)); then
  echo "- TLS sessions (EC P-256 certificate, the same for both): floodgate $fg_session, nginx $nginx_session; $(openssl version)"
fi
echo
echo "| server | key | median rps | floodgate / nginx | CPU us/req | CPU floodgate / nginx | p50 (us) | p99 (us) | rounds (rps) | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---|---:|"
for mode in random fixed; do
  # shellcheck disable=SC2086
  nginx_med=$(bench_median ${rps_runs["nginx|$mode"]})
  # shellcheck disable=SC2086
  nginx_cpu=$(bench_median ${cpu_runs["nginx|$mode"]})
  for server in floodgate nginx; do
    key="$server|$mode"
    # shellcheck disable=SC2086
    med=$(bench_median ${rps_runs[$key]})
    # shellcheck disable=SC2086
    cpu=$(bench_median ${cpu_runs[$key]})
    ratio="-" cpu_ratio="-"
    if [[ $server == floodgate ]]; then
      ratio=$(bench_ratio "$med" "$nginx_med")
      cpu_ratio=$(bench_ratio "$cpu" "$nginx_cpu")
    fi
    runs=""
    for v in ${rps_runs[$key]}; do runs+="$(bench_fmt_int "$v") "; done
    # shellcheck disable=SC2086
    echo "| $server | $mode | $(bench_fmt_int "$med") | $ratio | $cpu | $cpu_ratio | $(bench_fmt_int "$(bench_median ${p50_runs[$key]})") | $(bench_fmt_int "$(bench_median ${p99_runs[$key]})") | ${runs% } | ${err_runs[$key]} |"
  done
done
echo
echo "CPU us/req: the server's CPU time over the run, every thread (/proc/<pid>/task/*/schedstat; nginx: the master and its workers), divided by the requests wrk counted."
echo "Latencies are wrk's (closed loop: they exclude queueing a fixed-rate client would see; see latency_at_half_peak.sh)."
echo "floodgate answers 200 with a ~250-byte JSON body and RateLimit headers; nginx answers 200 with a 43-byte GIF."
echo "A single wrk thread drives the load; it can be the bottleneck for either server."
if ((https)); then
  echo "wrk keeps its 50 connections open for the whole run: 50 TLS handshakes a run, not counted apart."
fi
echo
echo "Commands:"
echo
echo '```'
if ((https)); then printf '%s\n' "${BENCH_TLS_CMDS[@]}"; fi
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
if ((https)); then
  echo "floodgate config:"
  echo
  echo '```yaml'
  grep -v '^#' "$FLOODGATE_CONFIG"
  echo '```'
  echo
fi
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
