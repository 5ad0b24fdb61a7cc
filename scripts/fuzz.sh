#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset, clang) and runs each for a
# bounded time on a copy of its seed corpus (fuzz/corpus/<name>/), so the
# repository's corpus is not flooded with generated inputs. Fails on a
# crash, leak or sanitizer report. Targets run JOBS at a time (default: the
# number of cores; each fuzzer is one process on one core), so every target
# still gets its full time and the stage takes 1/JOBS of the wall time.
#   FUZZ_SECONDS=N  seconds per target (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
jobs="${JOBS:-$(nproc)}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One target: its corpus, its run, its verdict in $work/<name>.rc.
fuzz_one() {
  local bin=$1 name corpus seeds rc=0
  name=$(basename "$bin" _fuzz)
  corpus="$work/$name"
  mkdir -p "$corpus"
  # Seeds: fuzz/corpus/<name>/, or the directory named by its first word
  # (http_parser -> fuzz/corpus/http/).
  for seeds in "fuzz/corpus/$name" "fuzz/corpus/${name%%_*}"; do
    if [[ -d "$seeds" ]]; then cp -r "$seeds/." "$corpus/"; break; fi
  done
  echo "--- fuzz $name for ${seconds}s" >&2
  # Each target in a directory of its own: libFuzzer writes crash-* files
  # to the working directory.
  mkdir -p "$work/run-$name"
  (cd "$work/run-$name" && "$OLDPWD/$bin" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 "$corpus" \
      2>"$work/$name.log") || rc=$?
  echo "$rc" >"$work/$name.rc"
}

running=0
for bin in build/fuzz/fuzz/*_fuzz; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$bin" &
  running=$((running + 1))
done
wait

failed=0
for bin in build/fuzz/fuzz/*_fuzz; do
  name=$(basename "$bin" _fuzz)
  if [[ "$(cat "$work/$name.rc" 2>/dev/null || echo missing)" != 0 ]]; then
    tail -n 60 "$work/$name.log" >&2 || true
    echo "fuzz $name: FAILED (see above)" >&2
    failed=1
  else
    echo "fuzz $name: $(grep -E '^stat::number_of_executed_units' "$work/$name.log" || echo ran)" >&2
  fi
done
((failed == 0)) || exit 1
echo "fuzz: every target ran clean" >&2
