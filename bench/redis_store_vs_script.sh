#!/usr/bin/env bash
# floodgate on the Redis store against the seed's fixed-window Lua script run
# directly on the same redis-server, with the same redis-benchmark arguments:
#
#   redis-server  EVALSHA <seed script> 1 key:__rand_int__ 60   (INCR, EXPIRE on the first)
#   floodgate     FG.CHECK bench key:__rand_int__                (--store redis://, 1e9/minute:
#                                                                 never denies)
#   redis-server  EVALSHA <floodgate's fixed_window script> ...  (what floodgate sends for one
#                                                                 decision, captured with
#                                                                 MONITOR; for reference)
#
# each with -P 1 and -P 16, for several rounds alternating the cells; prints
# the median requests/s per cell, floodgate's ratio to the seed script, and
# what each request cost inside Redis (INFO commandstats) and in CPU time of
# redis-server (INFO cpu) and floodgate (every thread, from
# /proc/<pid>/task/*/schedstat), as markdown. Redis CPU per decision is the
# figure the store is judged on (bench/lib.sh, "CPU placement").
#
# The keyspace is emptied (FLUSHALL) before every run, so every run starts
# with new subjects on both sides. A floodgate run counts only if every
# decision was an admission made by Redis: no denial (the local over-limit
# cache would answer those without Redis) and no backend error (the rule's
# on_backend_error answer); the script fails otherwise. floodgate's Redis
# request timeout is 1000 ms here (BENCH_FLOODGATE_REDIS_TIMEOUT_MS), so
# that a scheduling stall on a small machine is waited for.
#
# usage: bench/redis_store_vs_script.sh [--threads N] [--requests N] [--rounds R] [--no-script]
#                                       [--server-cpus LIST] [--client-cpus LIST]
#   --threads    floodgate event-loop threads (default 1: redis-server runs
#                commands on one thread)
#   --requests   redis-benchmark -n (default 1000000)
#   --rounds     rounds (default 3)
#   --no-script  leave out the reference cell (floodgate's script run directly)
#   --server-cpus, --client-cpus  where floodgate, and redis-server (the
#                store) with redis-benchmark, run (on a 2-core host:
#                --server-cpus 0 --client-cpus 1)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=1
requests=1000000
rounds=3
with_script=1
while (($#)); do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --requests) requests=${2:?--requests needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --no-script) with_script=0; shift ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]*$ && $requests =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] ||
  bench_die "--threads, --requests and --rounds take positive integers"

bench_require redis-server redis-cli redis-benchmark curl timeout ss
bench_require_floodgate
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

bench_start_redis
store="redis://127.0.0.1:$REDIS_PORT"
# Redis's answer to every decision is the point: a request timeout long
# enough that a scheduling stall on a small shared machine is waited for,
# not answered by on_backend_error (which would be faster, and is checked).
BENCH_FLOODGATE_REDIS_TIMEOUT_MS=${BENCH_FLOODGATE_REDIS_TIMEOUT_MS:-1000}
bench_start_floodgate "$threads" "$store"

rcli() { timeout 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# Seed 004's fixed-window script.
seed='local c = redis.call("INCR", KEYS[1]) if c == 1 then redis.call("EXPIRE", KEYS[1], ARGV[1]) end return c'
seed_sha=$(rcli SCRIPT LOAD "$seed")
[[ $seed_sha =~ ^[0-9a-f]{40}$ ]] || bench_die "SCRIPT LOAD answered '$seed_sha'"

# One decision through floodgate, watched with MONITOR: the EVALSHA it sends.
monitor_out=$BENCH_TMP/monitor.txt
timeout 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" MONITOR >"$monitor_out" 2>&1 &
monitor_pid=$!
_bench_register "$monitor_pid"
sleep 0.3
reply=$(timeout 10 redis-cli -h 127.0.0.1 -p "$FLOODGATE_RESP_PORT" FG.CHECK bench key:000000000001 2>&1) ||
  bench_die "FG.CHECK through floodgate failed: $reply"
sleep 0.3
bench_stop "$monitor_pid"
[[ $(head -n 1 <<<"$reply") == 1 ]] || bench_die "FG.CHECK bench was not admitted: $reply"
# MONITOR prints: 1700000000.123456 [0 127.0.0.1:1234] "EVALSHA" "sha" "1" "key" "fp" "" ...
# (the script may also have been sent by EVAL first, after a NOSCRIPT).
monitored=$(grep -m1 '"EVALSHA"' "$monitor_out" || true)
[[ -n $monitored ]] || bench_die "MONITOR did not see floodgate's EVALSHA: $(head -c 500 "$monitor_out")"
# Its arguments, one per quoted field (the "now" argument is empty: the
# script reads TIME), with the subject replaced by redis-benchmark's random
# placeholder.
fg_argv=()
while IFS= read -r field; do
  field=${field#\"}
  field=${field%\"}
  fg_argv+=("${field//000000000001/__rand_int__}")
done < <(grep -o '"[^"]*"' <<<"$monitored")
((${#fg_argv[@]} >= 5)) || bench_die "cannot read floodgate's EVALSHA from: $monitored"

# Cells: label | server | command. Labels are what the table shows.
cells=(
  "seed script|redis|EVALSHA $seed_sha 1 key:__rand_int__ 60"
  "floodgate FG.CHECK|floodgate|FG.CHECK bench key:__rand_int__"
)
# (@fg_argv: the captured words, kept as an array for the empty argument.)
if ((with_script)); then cells+=("floodgate's script, direct|redis|@fg_argv"); fi
pipelines=(1 16)

port_of() { if [[ $1 == redis ]]; then echo "$REDIS_PORT"; else echo "$FLOODGATE_RESP_PORT"; fi; }

# floodgate's backend errors so far, from /metrics.
backend_errors() {
  curl -s --max-time 5 "http://127.0.0.1:$FLOODGATE_HTTP_PORT/metrics" |
    awk '$1 == "floodgate_backend_errors_total" { v = $2 } END { printf "%d\n", v }'
}

# "calls usec" of EVALSHA and EVAL in Redis since the last CONFIG RESETSTAT.
script_stats() {
  rcli INFO commandstats | tr -d '\r' | awk -F'[:,=]' '
    $1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" {
      for (i = 2; i < NF; i += 2) { if ($i == "calls") c += $(i + 1); if ($i == "usec") u += $(i + 1) }
    }
    END { printf "%d %d\n", c, u }'
}

declare -A rps_runs calls_per_req redis_us_per_req redis_cpu_us fg_cpu_us
commands_used=()

# run_cell LABEL SERVER CMD P: one redis-benchmark run; records its figures.
run_cell() {
  local label=$1 server=$2 cmd=$3 p=$4 port out rps line key="$1|$4"
  port=$(port_of "$server")
  out=$BENCH_TMP/rb.csv
  local -a argv=(redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -r 100000 -n "$requests" -P "$p" --csv)
  if [[ $cmd == @fg_argv ]]; then
    argv+=("${fg_argv[@]}")
  else
    # shellcheck disable=SC2206
    argv+=($cmd)
  fi
  if [[ $round == 1 ]]; then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  # Every run starts from an empty keyspace (SCRIPT LOAD survives this).
  rcli FLUSHALL >/dev/null
  rcli CONFIG RESETSTAT >/dev/null
  local before="" errors_before=0 r0 f0=0
  if [[ $server == floodgate ]]; then
    before=$(bench_floodgate_decisions bench)
    errors_before=$(backend_errors)
    f0=$(bench_cpu_ns "$FLOODGATE_PID")
  fi
  r0=$(bench_redis_cpu_us "$REDIS_PORT")
  # Bounded: at least 10k requests/s or it is killed.
  local limit=$((requests / 10000 + 30))
  if ! BENCH_RUN_QUIET='^WARNING: Could not fetch server CONFIG$' bench_run "$limit" "$out" "${argv[@]}"; then
    bench_die "redis-benchmark failed: ${argv[*]}"
  fi
  local r1 f1=0
  r1=$(bench_redis_cpu_us "$REDIS_PORT")
  [[ $server == floodgate ]] && f1=$(bench_cpu_ns "$FLOODGATE_PID")
  line=$(grep -E '^"(EVALSHA|FG\.CHECK)' "$out" | tail -n 1)
  rps=$(awk -F'","' '{ print $2 }' <<<"$line")
  [[ $rps =~ ^[0-9.]+$ ]] || bench_die "no requests/s in redis-benchmark's output: $(cat "$out")"
  if [[ $server == floodgate ]]; then
    local after errors_after a1 d1 a2 d2
    after=$(bench_floodgate_decisions bench)
    errors_after=$(backend_errors)
    read -r a1 d1 <<<"$before"
    read -r a2 d2 <<<"$after"
    ((d2 - d1 == 0)) || bench_die "$label -P $p: $((d2 - d1)) denials (the rule must admit everything)"
    ((errors_after - errors_before == 0)) ||
      bench_die "$label -P $p: $((errors_after - errors_before)) decisions answered by on_backend_error (Redis failed or was late): not a valid run"
    ((a2 - a1 == requests)) || bench_die "$label -P $p: $((a2 - a1)) admissions for $requests requests"
  fi
  local calls usec
  read -r calls usec <<<"$(script_stats)"
  calls_per_req[$key]+="$(awk -v c="$calls" -v n="$requests" 'BEGIN { printf "%.3f", c / n }') "
  redis_us_per_req[$key]+="$(awk -v u="$usec" -v n="$requests" 'BEGIN { printf "%.2f", u / n }') "
  redis_cpu_us[$key]+="$(bench_per us $((r1 - r0)) "$requests") "
  fg_cpu_us[$key]+="$(bench_per ns $((f1 - f0)) "$requests") "
  rps_runs[$key]+="$rps "
  bench_log "round $round/$rounds: $label -P $p: $(bench_fmt_int "$rps") requests/s; $calls script calls in Redis"
}

# Each command must work before it is timed.
for cell in "${cells[@]}"; do
  IFS='|' read -r label server cmd <<<"$cell"
  if [[ $cmd == @fg_argv ]]; then
    words=("${fg_argv[@]//__rand_int__/000000000002}")
  else
    # shellcheck disable=SC2206
    words=(${cmd//__rand_int__/000000000002})
  fi
  # (tr: floodgate's script answers in packed binary)
  reply=$(timeout 10 redis-cli -h 127.0.0.1 -p "$(port_of "$server")" "${words[@]}" 2>&1 | tr -d '\0') ||
    bench_die "$label: redis-cli failed: $reply"
  case $reply in
    ERR* | WRONG* | NOSCRIPT* | NOAUTH* | "(error)"*) bench_die "$label: the server answered: $reply" ;;
  esac
done

bench_log "$rounds rounds x ${#cells[@]} cells x ${#pipelines[@]} pipeline depths, -n $requests"
for ((round = 1; round <= rounds; round++)); do
  # Alternate the cells; reverse the order every other round so that drift
  # (thermal, neighbours) does not always favour the same cells.
  order=()
  for p in "${pipelines[@]}"; do
    for ((i = 0; i < ${#cells[@]}; i++)); do order+=("$i:$p"); done
  done
  if ((round % 2 == 0)); then
    rev=()
    for ((k = ${#order[@]} - 1; k >= 0; k--)); do rev+=("${order[k]}"); done
    order=("${rev[@]}")
  fi
  for item in "${order[@]}"; do
    i=${item%%:*}
    p=${item##*:}
    IFS='|' read -r label server cmd <<<"${cells[i]}"
    run_cell "$label" "$server" "$cmd" "$p"
  done
done

med() {
  # shellcheck disable=SC2086
  bench_median $1
}

echo "## floodgate on the Redis store vs the seed script on redis-server ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- $(bench_cpu_placement)"
echo "- floodgate threads: $threads, store $store; redis-benchmark: -c 50 -r 100000 -n $requests; $rounds rounds, medians shown"
echo
echo "| cell | -P | median rps | vs seed script | rounds (rps) | script calls / request | Redis script us / request | redis-server CPU us / request | Redis CPU vs seed | floodgate CPU us / request |"
echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"
for p in "${pipelines[@]}"; do
  seed_med=$(med "${rps_runs["seed script|$p"]}")
  seed_cpu=$(med "${redis_cpu_us["seed script|$p"]}")
  for cell in "${cells[@]}"; do
    IFS='|' read -r label server cmd <<<"$cell"
    key="$label|$p"
    m=$(med "${rps_runs[$key]}")
    runs=""
    for v in ${rps_runs[$key]}; do runs+="$(bench_fmt_int "$v") "; done
    fg="-"
    [[ $server == floodgate ]] && fg=$(med "${fg_cpu_us[$key]}")
    echo "| $label | $p | $(bench_fmt_int "$m") | $(bench_ratio "$m" "$seed_med") | ${runs% } | $(med "${calls_per_req[$key]}") | $(med "${redis_us_per_req[$key]}") | $(med "${redis_cpu_us[$key]}") | $(bench_ratio "$(med "${redis_cpu_us[$key]}")" "$seed_cpu") | $fg |"
  done
done
echo
echo "Script calls and Redis script us per request: EVALSHA and EVAL calls and their time from"
echo "INFO commandstats (usec), divided by the requests redis-benchmark sent. CPU us per request:"
echo "the process's CPU time over the run, all threads (redis-server: INFO cpu; floodgate:"
echo "/proc/<pid>/task/*/schedstat), divided by the requests."
echo
echo "Commands:"
echo
echo '```'
echo "$REDIS_CMD"
echo "$(bench_quote redis-cli -h 127.0.0.1 -p "$REDIS_PORT" SCRIPT LOAD "$seed")   # -> $seed_sha"
echo "$FLOODGATE_CMD"
echo "# before each run: redis-cli -h 127.0.0.1 -p $REDIS_PORT FLUSHALL; ... CONFIG RESETSTAT"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "floodgate config (the bench rule; --store overrides the file's store):"
echo
echo '```yaml'
grep -v '^#' "$FLOODGATE_CONFIG"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
