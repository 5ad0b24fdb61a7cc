#!/usr/bin/env bash
# Instructions per decision (callgrind) for each algorithm on limiter_bench's
# hot-key and 1M-key paths: the A/B figure for any change to the decision
# path. Unlike time, it does not move with the host's load, so two builds
# compare to a fraction of a percent on a shared 2-core machine.
#
# What is counted: the instructions inside LimiterCore::CheckAndWait (the
# call every Limiter::Check makes: rule lookup, clock read, store, result),
# over its calls. Each cell runs twice under callgrind, a short and a longer
# run, and the figure is the difference of instructions over the difference
# of calls: the 1M-key path's warm-up (a million first decisions, inserts)
# is the same in both runs and drops out, and so does any one-off cost.
#
# The 1M-key path runs nearly the hot key's instructions: what it pays more
# is cache misses, which time (limiter_bench's ns, beside its flat_hash_map
# baseline) shows and instruction counts do not. Both figures belong in an
# A/B: instructions for the work a change adds or removes, time for memory.
#
# Prints a markdown table, one row per algorithm, with the command.
#
# usage: bench/instructions.sh [--bench PATH] [--algorithms LIST] [--paths LIST]
#   --bench       the limiter_bench binary (default build/release/bench/limiter_bench;
#                 build it with: cmake --build --preset release --target limiter_bench)
#   --algorithms  comma-separated (default kFixedWindow,kSlidingWindow,kSlidingLog,kTokenBucket,kGcra)
#   --paths       comma-separated: hot (one key), distinct (1M keys) (default hot,distinct)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench=$REPO_ROOT/build/release/bench/limiter_bench
algorithms=kFixedWindow,kSlidingWindow,kSlidingLog,kTokenBucket,kGcra
paths=hot,distinct
while (($#)); do
  case $1 in
    --bench) bench=${2:?--bench needs a path}; shift 2 ;;
    --algorithms) algorithms=${2:?--algorithms needs a list}; shift 2 ;;
    --paths) paths=${2:?--paths needs a list}; shift 2 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
[[ -x $bench ]] || bench_die "no limiter_bench at $bench (cmake --build --preset release --target limiter_bench)"
[[ $algorithms =~ ^k[A-Za-z]+(,k[A-Za-z]+)*$ ]] || bench_die "--algorithms: a list such as kFixedWindow,kGcra"
[[ $paths =~ ^(hot|distinct)(,(hot|distinct))*$ ]] || bench_die "--paths: hot, distinct or both"
bench_require valgrind timeout
bench_init
started=$SECONDS

collect='floodgate::service::LimiterCore::CheckAndWait(*'

# callgrind_run FILTER MIN_TIME: prints "instructions calls" inside
# CheckAndWait over one run of the cell.
callgrind_run() {
  local out=$BENCH_TMP/callgrind.out
  timeout 900 valgrind --tool=callgrind --callgrind-out-file="$out" "--toggle-collect=$collect" \
    "$bench" --benchmark_filter="$1" --benchmark_min_time="$2" >/dev/null 2>"$BENCH_TMP/valgrind.err" ||
    bench_die "valgrind failed on $1: $(tail -n 3 "$BENCH_TMP/valgrind.err")"
  # Totals of the collected events (instructions: Ir, the first), and the
  # calls whose callee is CheckAndWait.
  awk '
    /^(c?fn)=\([0-9]+\)/ {
      split($0, kv, "=")
      id = $0; sub(/^c?fn=\(/, "", id); sub(/\).*/, "", id)
      name = $0; sub(/^c?fn=\([0-9]+\) ?/, "", name)
      if (name != "") names[id] = name
      if (kv[1] == "cfn") callee = names[id]
      next
    }
    /^calls=/ {
      if (index(callee, "LimiterCore::CheckAndWait") > 0) { split($0, c, /[= ]/); calls += c[2] }
      next
    }
    /^(summary|totals):/ { total = $2 }
    END { printf "%.0f %.0f\n", total, calls }' "$out"
  rm -f "$out"
}

declare -A figure
IFS=',' read -r -a algs <<<"$algorithms"
IFS=',' read -r -a kinds <<<"$paths"
for alg in "${algs[@]}"; do
  for kind in "${kinds[@]}"; do
    if [[ $kind == hot ]]; then name=BM_CheckHotKey; else name=BM_CheckDistinctKeys; fi
    filter="^$name/$alg/real_time/threads:1\$"
    read -r i1 c1 <<<"$(callgrind_run "$filter" 0.02)"
    read -r i2 c2 <<<"$(callgrind_run "$filter" 0.2)"
    if ((c2 > c1)); then
      figure[$alg|$kind]=$(awk -v a="$i1" -v b="$i2" -v x="$c1" -v y="$c2" 'BEGIN { printf "%.1f", (b - a) / (y - x) }')
    else
      figure[$alg|$kind]="n/a"
    fi
    bench_log "$alg $kind: ${figure[$alg|$kind]} instructions per decision ($c1 and $c2 calls)"
  done
done

echo "## Instructions per decision, callgrind ($(date -u +%Y-%m-%d))"
echo
echo "- binary: $bench, built $(date -u -r "$bench" +%Y-%m-%dT%H:%MZ); tree at $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo "?") (rebuild it before comparing commits)"
echo
header="| algorithm |" rule="|---|"
for kind in "${kinds[@]}"; do
  if [[ $kind == hot ]]; then header+=" hot key |"; else header+=" 1M keys |"; fi
  rule+="---:|"
done
echo "$header"
echo "$rule"
for alg in "${algs[@]}"; do
  row="| $alg |"
  for kind in "${kinds[@]}"; do row+=" ${figure[$alg|$kind]} |"; done
  echo "$row"
done
echo
echo "Instructions inside LimiterCore::CheckAndWait, the difference of two runs (--benchmark_min_time 0.02 and 0.2) over the difference of its calls:"
echo
echo '```'
echo "valgrind --tool=callgrind '--toggle-collect=$collect' $bench --benchmark_filter='^BM_CheckHotKey/<algorithm>/real_time/threads:1\$' --benchmark_min_time=<0.02|0.2>"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
