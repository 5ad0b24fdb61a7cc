#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine: installs what it
# needs, builds the release preset and runs every test (unit tests and the
# integration tests against real clients and servers), runs each benchmark
# briefly (so they keep working), checks the installed CMake package, runs
# every fuzzer for a bounded time, then builds and runs the suite again
# under ASan+UBSan.
#   FLOODGATE_SKIP_ASAN=1  skip the sanitizer pass (quick local runs)
#   FLOODGATE_SKIP_FUZZ=1  skip the fuzzers
#   FUZZ_SECONDS=N         seconds per fuzzer (default 20)
#   FLOODGATE_TSAN=1       also run the suite under TSan
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"

scripts/setup.sh

run_preset() {
  local preset=$1
  echo "=== ${preset}: configure and build" >&2
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$JOBS"
  echo "=== ${preset}: tests" >&2
  ctest --preset "$preset" -j "$JOBS"
}

run_preset release

echo "=== benchmarks (brief run)" >&2
for b in build/release/bench/*_bench; do
  echo "--- $b" >&2
  "$b" --benchmark_min_time=0.01 >/dev/null
done

echo "=== installed package: find_package(floodgate)" >&2
scripts/check-package.sh build/release

if [[ "${FLOODGATE_SKIP_FUZZ:-0}" != 1 ]]; then
  echo "=== fuzzers" >&2
  scripts/fuzz.sh
fi

if [[ "${FLOODGATE_SKIP_ASAN:-0}" != 1 ]]; then
  run_preset asan
fi
if [[ "${FLOODGATE_TSAN:-0}" == 1 ]]; then
  run_preset tsan
fi
echo "=== all tests passed" >&2
