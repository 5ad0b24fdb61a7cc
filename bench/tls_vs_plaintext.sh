#!/usr/bin/env bash
# What TLS costs a decision: two floodgate servers from the same binary and
# the same config, one in clear, one with
#   tls: { cert_file: server.pem, key_file: server.key }
#   listen_tls: { resp: true, http: true }
# (a throwaway CA and server certificate, EC P-256, made at start), measured
# one after the other with the same load, alternating which goes first each
# round. Two servers because a front has one address, in clear or TLS; the
# one not measured has no connection and sleeps.
#
#   HTTP  wrk -t1 -c50 -dS: GET /v1/check?rule=bench&key=key:<random 0..99999>
#         (a Lua script picks the key), http:// against https://
#   RESP  redis-benchmark -c 50 -r 100000 -n N -P 1 and -P 16:
#         FG.CHECK bench key:__rand_int__, without and with --tls --cacert
#
# The rule (1e9/minute) never denies: the cost of a decision. Connections
# stay open for the whole run (wrk and redis-benchmark keep them alive):
# each run makes 50 handshakes (about 0.4 ms of the server's CPU each on
# a 2.6 GHz core: 0.4-1.1 % of a run's), so the TLS figures are those of a
# session's reads and writes (record encryption and decryption, the
# library's buffers and syscalls), not of handshakes.
#
# Prints, per cell, the median requests/s and the server's CPU time per
# decision (all its threads, over the decisions its /metrics counted;
# bench/lib.sh, "CPU placement"), the ratios TLS / plaintext (each round's
# too: the two servers ran back to back) and how busy the server's CPU was,
# as a markdown table.
#
# usage: bench/tls_vs_plaintext.sh [--threads N|default] [--duration S] [--requests N] [--rounds R]
#                                  [--server-cpus LIST] [--client-cpus LIST]
#   --threads   floodgate event-loop threads (default: floodgate's own
#               choice, what a user who sets nothing gets)
#   --duration  seconds per wrk run (default 5)
#   --requests  redis-benchmark -n at -P 1 (default 200000); -P 16 runs
#               send 8 times as many, so that they last about as long
#   --rounds    rounds (default 5)
#   --server-cpus, --client-cpus  where the two floodgate servers, and wrk
#               and redis-benchmark, run (on a 2-core host: --server-cpus 0
#               --client-cpus 1)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=default
duration=5
requests=200000
rounds=5
while (($#)); do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --requests) requests=${2:?--requests needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
if [[ $threads == default ]]; then threads=0; fi
[[ $threads =~ ^[0-9]+$ && $duration =~ ^[1-9][0-9]*$ && $requests =~ ^[1-9][0-9]*$ &&
  $rounds =~ ^[1-9][0-9]*$ ]] ||
  bench_die "--threads takes a positive integer or 'default'; --duration, --requests and --rounds positive integers"
((duration <= 120)) || bench_die "--duration is at most 120"

bench_require wrk redis-cli redis-benchmark openssl curl timeout ss
bench_require_floodgate
bench_init
started=$SECONDS
facts=$(bench_machine_facts)
bench_make_tls_cert

declare -A port_http port_resp pid url cmdline session
for side in plain tls; do
  if [[ $side == tls ]]; then tls=1; else tls=0; fi
  BENCH_FLOODGATE_NAME=floodgate-$side BENCH_FLOODGATE_TLS=$tls bench_start_floodgate "$threads"
  port_http[$side]=$FLOODGATE_HTTP_PORT
  port_resp[$side]=$FLOODGATE_RESP_PORT
  pid[$side]=$FLOODGATE_PID
  url[$side]=$FLOODGATE_HTTP_URL
  cmdline[$side]=$FLOODGATE_CMD
done
session[http]=$(bench_tls_session "127.0.0.1:${port_http[tls]}")
session[resp]=$(bench_tls_session "127.0.0.1:${port_resp[tls]}")
[[ ${session[http]} == TLS* && ${session[resp]} == TLS* ]] ||
  bench_die "no TLS session with the TLS server: http ${session[http]}, resp ${session[resp]}"
loops=$(grep -m1 -o 'threads=[0-9]*' "$BENCH_TMP/floodgate-plain.log")

# The load must work on both sides before it is timed.
tls_args=(--tls --cacert "$BENCH_TLS_CA")
for side in plain tls; do
  a=()
  if [[ $side == tls ]]; then a=("${tls_args[@]}"); fi
  reply=$(timeout 10 redis-cli "${a[@]}" -h 127.0.0.1 -p "${port_resp[$side]}" FG.CHECK bench key:1 2>&1) ||
    bench_die "$side: redis-cli failed: $reply"
  [[ $(head -n 1 <<<"$reply") == 1 ]] || bench_die "$side: FG.CHECK answered: $reply"
  code=$(bench_curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${url[$side]}/v1/check?rule=bench&key=key:1")
  [[ $code == 200 ]] || bench_die "$side: GET /v1/check answered $code"
done

lua=$BENCH_TMP/random_key.lua
cat >"$lua" <<'EOF'
-- A random key in 0..99999 per request.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/v1/check?rule=bench&key=key:" .. math.random(0, 99999))
end
EOF

cells=("http 1" "resp 1" "resp 16")
declare -A rps_runs cpu_runs busy_runs
commands_used=()
failures=0

# round_ratios "A1 A2 ..." "B1 B2 ...": A1/B1 A2/B2 ..., two decimals.
round_ratios() {
  paste -d' ' <(tr ' ' '\n' <<<"${1% }") <(tr ' ' '\n' <<<"${2% }") |
    awk '$2 > 0 { printf "%s%.2f", (NR > 1 ? " " : ""), $1 / $2 }'
}

decisions() {  # decisions SIDE: allowed + denied of rule bench so far
  local a d
  read -r a d <<<"$(bench_floodgate_decisions bench "${url[$1]}")"
  echo $((a + d))
}

# run SIDE FRONT P: one run against one server.
run() {
  local side=$1 front=$2 p=$3 out=$BENCH_TMP/load.out rps n0 n1 cpu0 cpu1 t0 t1 limit key
  local -a argv
  if [[ $front == http ]]; then
    local scheme=http
    if [[ $side == tls ]]; then scheme=https; fi
    argv=(wrk -t1 -c50 "-d${duration}s" -s "$lua" "$scheme://127.0.0.1:${port_http[$side]}/v1/check?rule=bench&key=key:0")
    limit=$((duration + 30))
  else
    local n=$requests
    if ((p > 1)); then n=$((requests * 8)); fi
    argv=(redis-benchmark)
    if [[ $side == tls ]]; then argv+=("${tls_args[@]}"); fi
    argv+=(-h 127.0.0.1 -p "${port_resp[$side]}" -c 50 -r 100000 -n "$n" -P "$p" --csv
      FG.CHECK bench key:__rand_int__)
    # Bounded: at least 10k requests/s or it is killed.
    limit=$((n / 10000 + 30))
  fi
  if ((round == 1)); then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  n0=$(decisions "$side")
  cpu0=$(bench_cpu_ns "${pid[$side]}")
  t0=$(date +%s%N)
  # floodgate answers CONFIG GET with an empty list, which redis-benchmark
  # reports on every run.
  BENCH_RUN_QUIET='^WARNING: Could not fetch server CONFIG$' bench_run "$limit" "$out" "${argv[@]}" ||
    bench_die "load failed: ${argv[*]}: $(cat "$out")"
  t1=$(date +%s%N)
  cpu1=$(bench_cpu_ns "${pid[$side]}")
  n1=$(decisions "$side")
  if [[ $front == http ]]; then
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
    local non2xx sockerr
    non2xx=$(awk -F': *' '/Non-2xx or 3xx responses/ { print $2 }' "$out")
    sockerr=$(awk '/Socket errors:/ { n = 0; for (i = 3; i <= NF; i += 2) n += $(i + 1); print n }' "$out" | tr -d ',')
    if ((${non2xx:-0} + ${sockerr:-0} > 0)); then
      bench_log "WARNING: $side http: non-2xx ${non2xx:-0}, socket errors ${sockerr:-0}"
      failures=$((failures + 1))
    fi
  else
    rps=$(grep -F '"FG.CHECK bench key:__rand_int__"' "$out" | tail -n 1 | awk -F'","' '{ print $2 }')
    if ((n1 - n0 < n)); then
      bench_log "WARNING: $side resp -P $p: $((n1 - n0)) decisions for $n requests"
      failures=$((failures + 1))
    fi
  fi
  [[ $rps =~ ^[0-9.]+$ ]] || bench_die "no requests/s in the output of ${argv[*]}: $(cat "$out")"
  key="$side|$front|$p"
  rps_runs[$key]+="$rps "
  cpu_runs[$key]+="$(bench_per ns $((cpu1 - cpu0)) $((n1 - n0))) "
  busy_runs[$key]+="$(awk -v c=$((cpu1 - cpu0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.0f", 100 * c / t }') "
  local label=$front
  if [[ $front == resp ]]; then label+=" -P $p"; fi
  bench_log "round $round/$rounds: $side $label: $(bench_fmt_int "$rps") requests/s, $(bench_per ns $((cpu1 - cpu0)) $((n1 - n0))) us CPU per decision"
}

bench_log "$rounds rounds x ${#cells[@]} loads x 2 servers (wrk ${duration}s; redis-benchmark -n $requests at -P 1, $((requests * 8)) at -P 16)"
for ((round = 1; round <= rounds; round++)); do
  for cell in "${cells[@]}"; do
    read -r front p <<<"$cell"
    if ((round % 2)); then sides=(plain tls); else sides=(tls plain); fi
    for side in "${sides[@]}"; do run "$side" "$front" "$p"; done
  done
done

echo "## floodgate over TLS against plaintext ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- $(openssl version) (wrk, redis-benchmark and floodgate use the system's libssl)"
echo "- $(bench_cpu_placement)"
echo "- floodgate threads: $( ((threads > 0)) && echo "$threads" || echo "default ($loops)") in both servers; TLS sessions: HTTP ${session[http]}, RESP ${session[resp]} (EC P-256 certificate)"
echo "- $rounds rounds, the two servers back to back in each, alternating which goes first; medians shown"
echo
echo "| front | load | rps plaintext | rps TLS | rps TLS / plain | CPU us/decision plaintext | CPU us/decision TLS | **CPU TLS / plain** | rounds (CPU TLS / plain) | server CPU busy plain / TLS | rounds rps plain | rounds rps TLS |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|"
for cell in "${cells[@]}"; do
  read -r front p <<<"$cell"
  kp="plain|$front|$p"
  kt="tls|$front|$p"
  if [[ $front == http ]]; then
    load="wrk -c50, keep-alive"
  else
    load="FG.CHECK -P $p"
  fi
  # shellcheck disable=SC2086
  r_p=$(bench_median ${rps_runs[$kp]})
  # shellcheck disable=SC2086
  r_t=$(bench_median ${rps_runs[$kt]})
  # shellcheck disable=SC2086
  c_p=$(bench_median ${cpu_runs[$kp]})
  # shellcheck disable=SC2086
  c_t=$(bench_median ${cpu_runs[$kt]})
  # shellcheck disable=SC2086
  b_p=$(bench_median ${busy_runs[$kp]})
  # shellcheck disable=SC2086
  b_t=$(bench_median ${busy_runs[$kt]})
  c_rounds=$(round_ratios "${cpu_runs[$kt]}" "${cpu_runs[$kp]}")
  r_rounds=$(round_ratios "${rps_runs[$kt]}" "${rps_runs[$kp]}")
  rr_p="" rr_t=""
  for v in ${rps_runs[$kp]}; do rr_p+="$(bench_fmt_int "$v") "; done
  for v in ${rps_runs[$kt]}; do rr_t+="$(bench_fmt_int "$v") "; done
  # shellcheck disable=SC2086
  echo "| ${front^^} | $load | $(bench_fmt_int "$r_p") | $(bench_fmt_int "$r_t") | $(bench_median $r_rounds) | $c_p | $c_t | **$(bench_median $c_rounds)** | $c_rounds | $(bench_fmt_int "$b_p") % / $(bench_fmt_int "$b_t") % | ${rr_p% } | ${rr_t% } |"
done
echo
echo "CPU us/decision: the server's CPU time over the run, every thread (/proc/<pid>/task/*/schedstat), divided by the decisions its /metrics counted over the run."
echo "TLS / plain: the median of the rounds' ratios (in each round the two servers ran back to back)."
echo "server CPU busy: that CPU time over the run's wall time (100 % per loop thread: under it, the server waited for the client)."
echo "Each run holds 50 connections open throughout: 50 TLS handshakes a run, not counted apart."
echo
echo "Commands:"
echo
echo '```'
printf '%s\n' "${BENCH_TLS_CMDS[@]}"
echo "${cmdline[plain]}   # config: below"
echo "${cmdline[tls]}   # config: below, with tls and listen_tls"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "floodgate config (the TLS server's; the plaintext one has neither tls nor listen_tls):"
echo
echo '```yaml'
grep -v '^#' "$BENCH_TMP/floodgate-tls.yaml"
echo '```'
echo
echo "wrk script ($(basename "$lua")):"
echo
echo '```lua'
cat "$lua"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
if ((failures > 0)); then
  bench_log "$failures run(s) had errors: the numbers above are suspect"
  exit 1
fi
