#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset, clang) and runs each for a
# bounded time on a copy of its seed corpus (fuzz/corpus/<name>/), so the
# repository's corpus is not flooded with generated inputs. Fails on the
# first crash, leak or sanitizer report.
#   FUZZ_SECONDS=N  seconds per target (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${JOBS:-$(nproc)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for bin in build/fuzz/fuzz/*_fuzz; do
  name=$(basename "$bin" _fuzz)
  corpus="$work/$name"
  mkdir -p "$corpus"
  # Seeds: fuzz/corpus/<name>/, or the directory named by its first word
  # (http_parser -> fuzz/corpus/http/).
  for seeds in "fuzz/corpus/$name" "fuzz/corpus/${name%%_*}"; do
    if [[ -d "$seeds" ]]; then cp -r "$seeds/." "$corpus/"; break; fi
  done
  echo "--- fuzz $name for ${seconds}s" >&2
  (cd "$work" && "$OLDPWD/$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 "$corpus" 2>"$work/$name.log") || {
    tail -n 60 "$work/$name.log" >&2
    echo "fuzz $name: FAILED (see above)" >&2
    exit 1
  }
  grep -E "^stat::number_of_executed_units" "$work/$name.log" >&2 || true
done
echo "fuzz: every target ran clean" >&2
