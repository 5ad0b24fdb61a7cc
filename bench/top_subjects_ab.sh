#!/usr/bin/env bash
# What the top-subjects sketch (and the sampled denied log) costs a
# decision through the RESP front: two floodgate servers from the same
# binary on the embedded store, one with the defaults (sketch on), one with
#   visibility: { top_subjects: false, denied_log_interval: off }
# measured one after the other with the same redis-benchmark arguments,
# alternating which goes first each round; prints the median requests/s
# and CPU time per decision (the server's, all threads; bench/lib.sh, "CPU
# placement") per cell and the ratios on/off as a markdown table. CPU per
# decision is the figure the sketch's cost is judged on: it holds on a
# shared host where requests/s moves 10-30 % between runs.
#
#   FG.CHECK spam key:__rand_int__    (10/min,100/h,500/day: denies often)
#   FG.CHECK bench key:__rand_int__   (1e9/min: never denies)
#
# usage: bench/top_subjects_ab.sh [--threads N|default] [--requests N] [--rounds R]
#                                 [--server-cpus LIST] [--client-cpus LIST]
#   --server-cpus, --client-cpus  where the two floodgate servers, and
#               redis-benchmark, run (on a 2-core host: --server-cpus 0
#               --client-cpus 1)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=1
requests=1000000
rounds=5
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
if [[ $threads == default ]]; then threads=0; fi
[[ $threads =~ ^[0-9]+$ && $requests =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] ||
  bench_die "--threads takes a positive integer or 'default'; --requests and --rounds positive integers"

bench_require redis-cli redis-benchmark curl timeout ss
bench_require_floodgate
bench_init
started=$SECONDS
facts=$(bench_machine_facts)

declare -A port pid cmdline config
bench_start_floodgate "$threads"
port[on]=$FLOODGATE_RESP_PORT
pid[on]=$FLOODGATE_PID
cmdline[on]=$FLOODGATE_CMD
config[on]=$(grep -v '^#' "$FLOODGATE_CONFIG")
mv "$FLOODGATE_CONFIG" "$BENCH_TMP/floodgate-on.yaml"
BENCH_FLOODGATE_EXTRA_CONFIG="visibility: { top_subjects: false, denied_log_interval: off }"
bench_start_floodgate "$threads"
port[off]=$FLOODGATE_RESP_PORT
pid[off]=$FLOODGATE_PID
cmdline[off]=$FLOODGATE_CMD
config[off]=$(grep -v '^#' "$FLOODGATE_CONFIG")

cells=("FG.CHECK spam key:__rand_int__" "FG.CHECK bench key:__rand_int__")
pipelines=(1 16)
declare -A rps_runs cpu_runs
commands_used=()

run() {  # run SIDE CMD P
  local side=$1 cmd=$2 p=$3 out=$BENCH_TMP/rb.csv line rps
  local -a argv=(redis-benchmark -h 127.0.0.1 -p "${port[$side]}" -c 50 -r 100000 -n "$requests"
    -P "$p" --csv)
  # shellcheck disable=SC2206
  argv+=($cmd)
  if ((round == 1)) && [[ $side == on ]]; then commands_used+=("$(bench_quote "${argv[@]}")"); fi
  local limit=$((requests / 20000 + 30)) cpu0 cpu1
  cpu0=$(bench_cpu_ns "${pid[$side]}")
  BENCH_RUN_QUIET='^WARNING: Could not fetch server CONFIG$' bench_run "$limit" "$out" "${argv[@]}" ||
    bench_die "redis-benchmark failed: ${argv[*]}"
  cpu1=$(bench_cpu_ns "${pid[$side]}")
  cpu_runs["$side|$cmd|$p"]+="$(bench_per ns $((cpu1 - cpu0)) "$requests") "
  line=$(grep -F "\"$cmd\"" "$out" | tail -n 1)
  rps=$(awk -F'","' '{ print $2 }' <<<"$line")
  [[ $rps =~ ^[0-9.]+$ ]] || bench_die "no requests/s in redis-benchmark's output: $(cat "$out")"
  rps_runs["$side|$cmd|$p"]+="$rps "
  bench_log "round $round/$rounds: sketch $side, $cmd -P $p: $(bench_fmt_int "$rps") requests/s, $(bench_per ns $((cpu1 - cpu0)) "$requests") us CPU per decision"
}

for ((round = 1; round <= rounds; round++)); do
  for p in "${pipelines[@]}"; do
    for cmd in "${cells[@]}"; do
      if ((round % 2)); then sides=(on off); else sides=(off on); fi
      for side in "${sides[@]}"; do run "$side" "$cmd" "$p"; done
    done
  done
done

echo "## Top subjects: the sketch on against off ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo "- $(bench_cpu_placement)"
echo "- floodgate threads: $( ((threads > 0)) && echo "$threads" || echo "default"); redis-benchmark: -c 50 -r 100000 -n $requests; $rounds rounds, the two servers alternating; median shown"
echo
echo "| command | -P | CPU us/decision on | off | CPU on / off | rounds on / off (CPU) | median rps on | off | rps on / off | rounds on | rounds off |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|"
for p in "${pipelines[@]}"; do
  for cmd in "${cells[@]}"; do
    # shellcheck disable=SC2086
    on=$(bench_median ${rps_runs["on|$cmd|$p"]})
    # shellcheck disable=SC2086
    off=$(bench_median ${rps_runs["off|$cmd|$p"]})
    r_on="" r_off=""
    for v in ${rps_runs["on|$cmd|$p"]}; do r_on+="$(bench_fmt_int "$v") "; done
    for v in ${rps_runs["off|$cmd|$p"]}; do r_off+="$(bench_fmt_int "$v") "; done
    # shellcheck disable=SC2086
    c_on=$(bench_median ${cpu_runs["on|$cmd|$p"]})
    # shellcheck disable=SC2086
    c_off=$(bench_median ${cpu_runs["off|$cmd|$p"]})
    # Each round's own ratio: the two servers ran back to back.
    c_rounds=$(paste -d' ' <(tr ' ' '\n' <<<"${cpu_runs["on|$cmd|$p"]% }") <(tr ' ' '\n' <<<"${cpu_runs["off|$cmd|$p"]% }") |
      awk '$2 > 0 { printf "%s%.3f", (NR > 1 ? " " : ""), $1 / $2 }')
    echo "| \`$cmd\` | $p | $c_on | $c_off | $(bench_ratio "$c_on" "$c_off" 3) | $c_rounds | $(bench_fmt_int "$on") | $(bench_fmt_int "$off") | $(bench_ratio "$on" "$off") | ${r_on% } | ${r_off% } |"
  done
done
echo
echo "CPU us/decision: the server's CPU time over the run, every thread (/proc/<pid>/task/*/schedstat), divided by the decisions (redis-benchmark -n)."
echo
echo "Commands:"
echo
echo '```'
echo "${cmdline[on]}   # config: defaults"
echo "${cmdline[off]}   # config: + visibility: { top_subjects: false, denied_log_interval: off }"
printf '%s\n' "${commands_used[@]}"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
