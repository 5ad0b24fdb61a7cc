#!/usr/bin/env bash
# floodgate's RESP front against redis-server, with the same redis-benchmark
# arguments for every command:
#
#   redis-server  INCR key:__rand_int__                      (the floor: one counter)
#   redis-server  EVALSHA <seed script> 1 key:__rand_int__ 60 (seed 004's fixed window in Lua)
#   floodgate     FG.CHECK spam key:__rand_int__             (10/min,100/h,500/day: denies often)
#   floodgate     FG.CHECK bench key:__rand_int__            (1e9/min: never denies)
#   floodgate     CL.THROTTLE key:__rand_int__ 100 1000 60   (redis-cell compatible GCRA)
#
# each with -P 1 and -P 16, for several rounds alternating the servers;
# prints the median requests/s per cell and the server's CPU time per
# request (all its threads; bench/lib.sh, "CPU placement") as a markdown
# table.
#
# usage: bench/resp_vs_redis.sh [--threads N] [--requests N] [--rounds R]
#                               [--server-cpus LIST] [--client-cpus LIST]
#   --threads   floodgate event-loop threads (default 1: redis-server runs
#               commands on one thread), or 'default' for floodgate's own
#               choice (what a user who sets nothing gets)
#   --requests  redis-benchmark -n (default 1000000)
#   --rounds    rounds (default 3)
#   --server-cpus, --client-cpus  where floodgate and redis-server (both
#               servers here), and redis-benchmark, run: taskset lists (on a
#               2-core host: --server-cpus 0 --client-cpus 1)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=1
requests=1000000
rounds=3
while (($#)); do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --requests) requests=${2:?--requests needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --server-cpus | --client-cpus) bench_cpu_arg "$1" "${2:-}"; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
# --threads default: floodgate's own choice (server.threads 0), as a user
# who sets nothing gets it.
if [[ $threads == default ]]; then threads=0; fi
[[ $threads =~ ^[0-9]+$ && $requests =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] ||
  bench_die "--threads takes a positive integer or 'default'; --requests and --rounds positive integers"

bench_require redis-server redis-cli redis-benchmark curl timeout ss
bench_require_floodgate
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

bench_start_redis server
bench_start_floodgate "$threads"

# Seed 004's fixed-window script.
script='local c = redis.call("INCR", KEYS[1]) if c == 1 then redis.call("EXPIRE", KEYS[1], ARGV[1]) end return c'
sha=$(timeout 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" SCRIPT LOAD "$script")
[[ $sha =~ ^[0-9a-f]{40}$ ]] || bench_die "SCRIPT LOAD answered '$sha'"

# Cells: label | server | command. Labels are what the table shows.
cells=(
  "redis INCR|redis|INCR key:__rand_int__"
  "redis EVALSHA seed script|redis|EVALSHA $sha 1 key:__rand_int__ 60"
  "floodgate FG.CHECK spam|floodgate|FG.CHECK spam key:__rand_int__"
  "floodgate FG.CHECK bench|floodgate|FG.CHECK bench key:__rand_int__"
  "floodgate CL.THROTTLE|floodgate|CL.THROTTLE key:__rand_int__ 100 1000 60"
)
pipelines=(1 16)

port_of() { if [[ $1 == redis ]]; then echo "$REDIS_PORT"; else echo "$FLOODGATE_RESP_PORT"; fi; }

# Each command must work before it is timed: one call through redis-cli,
# whose reply must not be an error.
for cell in "${cells[@]}"; do
  IFS='|' read -r label server cmd <<<"$cell"
  # shellcheck disable=SC2086
  reply=$(timeout 10 redis-cli -h 127.0.0.1 -p "$(port_of "$server")" ${cmd//__rand_int__/000000000001} 2>&1) ||
    bench_die "$label: redis-cli failed: $reply"
  case $reply in
    ERR* | WRONG* | NOSCRIPT* | NOAUTH* | "(error)"*) bench_die "$label: the server answered: $reply" ;;
  esac
done

declare -A rps_runs  # "label|P" -> space-separated rps of each round
declare -A cpu_runs  # "label|P" -> the server's CPU us per request of each round
declare -A denied_total allowed_total  # per cell, over all rounds
commands_used=()

# run_cell LABEL SERVER CMD P: one redis-benchmark run; records its rps.
run_cell() {
  local label=$1 server=$2 cmd=$3 p=$4 port out rps line
  port=$(port_of "$server")
  out=$BENCH_TMP/rb.csv
  local -a argv=(redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -r 100000 -n "$requests" -P "$p" --csv)
  # shellcheck disable=SC2206
  argv+=($cmd)
  if [[ $round == 1 ]]; then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  local rule="" before after
  if [[ $server == floodgate && $cmd == FG.CHECK* ]]; then
    rule=$(awk '{ print $2 }' <<<"$cmd")
  elif [[ $server == floodgate && $cmd == CL.THROTTLE* ]]; then
    rule=CL.THROTTLE  # counted under the command's name
  fi
  if [[ -n $rule ]]; then
    before=$(bench_floodgate_decisions "$rule")
  fi
  if [[ $server == redis ]]; then
    # Every redis run starts from an empty keyspace, so the script's EXPIRE
    # branch runs as often as in a fresh window (SCRIPT LOAD survives this).
    timeout 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL >/dev/null
  fi
  # Bounded: at least 20k requests/s or it is killed.
  local limit=$((requests / 20000 + 30)) cpu0 cpu1 unit
  if [[ $server == redis ]]; then unit=us; cpu0=$(bench_redis_cpu_us "$REDIS_PORT")
  else unit=ns; cpu0=$(bench_cpu_ns "$FLOODGATE_PID"); fi
  # floodgate answers CONFIG GET with an empty list, which redis-benchmark
  # reports on every run.
  if ! BENCH_RUN_QUIET='^WARNING: Could not fetch server CONFIG$' bench_run "$limit" "$out" "${argv[@]}"; then
    bench_die "redis-benchmark failed: ${argv[*]}"
  fi
  if [[ $server == redis ]]; then cpu1=$(bench_redis_cpu_us "$REDIS_PORT")
  else cpu1=$(bench_cpu_ns "$FLOODGATE_PID"); fi
  cpu_runs["$label|$p"]+="$(bench_per "$unit" $((cpu1 - cpu0)) "$requests") "
  line=$(grep -F "\"$cmd\"" "$out" | tail -n 1)
  rps=$(awk -F'","' '{ print $2 }' <<<"$line")
  [[ $rps =~ ^[0-9.]+$ ]] || bench_die "no requests/s in redis-benchmark's output: $(cat "$out")"
  if [[ -n $rule ]]; then
    after=$(bench_floodgate_decisions "$rule")
    local key="$label|$p"
    read -r a1 d1 <<<"$before"
    read -r a2 d2 <<<"$after"
    allowed_total[$key]=$((${allowed_total[$key]:-0} + a2 - a1))
    denied_total[$key]=$((${denied_total[$key]:-0} + d2 - d1))
  fi
  rps_runs["$label|$p"]+="$rps "
  bench_log "round $round/$rounds: $label -P $p: $(bench_fmt_int "$rps") requests/s"
}

bench_log "$rounds rounds x ${#cells[@]} commands x ${#pipelines[@]} pipeline depths, -n $requests"
for ((round = 1; round <= rounds; round++)); do
  # Alternate servers; reverse the order every other round so that drift
  # (thermal, neighbours) does not always favour the same cells.
  order=()
  for p in "${pipelines[@]}"; do
    for i in 0 2 1 3 4; do order+=("$i:$p"); done
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

echo "## floodgate RESP vs redis-server ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- $(bench_cpu_placement)"
echo "- floodgate threads: $( ((threads > 0)) && echo "$threads" || echo "default ($(grep -m1 -o 'threads=[0-9]*' "$BENCH_TMP/floodgate.log"))"); redis-benchmark: -c 50 -r 100000 -n $requests, single-threaded client; $rounds rounds, median shown"
echo
echo "| command | -P | median rps | vs redis INCR | vs seed script | rounds (rps) | server CPU us/req | CPU vs INCR | denied |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|"
for p in "${pipelines[@]}"; do
  # shellcheck disable=SC2086
  incr=$(bench_median ${rps_runs["redis INCR|$p"]})
  # shellcheck disable=SC2086
  seed=$(bench_median ${rps_runs["redis EVALSHA seed script|$p"]})
  # shellcheck disable=SC2086
  incr_cpu=$(bench_median ${cpu_runs["redis INCR|$p"]})
  for cell in "${cells[@]}"; do
    IFS='|' read -r label server cmd <<<"$cell"
    key="$label|$p"
    # shellcheck disable=SC2086
    med=$(bench_median ${rps_runs[$key]})
    runs=""
    for v in ${rps_runs[$key]}; do runs+="$(bench_fmt_int "$v") "; done
    denied="-"
    if [[ -n ${allowed_total[$key]:-} ]]; then
      total=$((allowed_total[$key] + denied_total[$key]))
      denied=$(awk -v d="${denied_total[$key]}" -v t="$total" 'BEGIN { if (t == 0) print "n/a"; else printf "%.0f%%\n", 100 * d / t }')
    fi
    # shellcheck disable=SC2086
    cpu=$(bench_median ${cpu_runs[$key]})
    echo "| ${server/redis/redis-server} \`${cmd/$sha/<sha>}\` | $p | $(bench_fmt_int "$med") | $(bench_ratio "$med" "$incr") | $(bench_ratio "$med" "$seed") | ${runs% } | $cpu | $(bench_ratio "$cpu" "$incr_cpu") | $denied |"
  done
done
echo
echo "server CPU us/req: the answering server's CPU time over the run (floodgate: every thread, /proc/<pid>/task/*/schedstat; redis-server: INFO cpu), divided by the requests."
echo "\"denied\": share of floodgate's decisions that were denials during the timed runs (from its /metrics)."
echo "With -P 16 the single-threaded redis-benchmark client itself can be the bottleneck: compare -P 16 rows with care."
echo
echo "Commands:"
echo
echo '```'
echo "$REDIS_CMD"
echo "$(bench_quote redis-cli -h 127.0.0.1 -p "$REDIS_PORT" SCRIPT LOAD "$script")   # -> $sha"
echo "$FLOODGATE_CMD"
echo "# before each redis-server run: redis-cli -h 127.0.0.1 -p $REDIS_PORT FLUSHALL"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "floodgate config:"
echo
echo '```yaml'
grep -v '^#' "$FLOODGATE_CONFIG"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
