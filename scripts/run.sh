#!/usr/bin/env bash
# Builds floodgate (release preset) on a fresh Debian 12 machine and runs it
# on the embedded store with examples/floodgate.yaml. Extra arguments are
# passed to the floodgate binary instead of the default demonstration.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target floodgate_cli >&2
bin=build/release/floodgate
if (($# > 0)); then
  exec "$bin" "$@"
fi
"$bin" check-config examples/floodgate.yaml
echo "--- replaying examples/traffic.csv through rule 'login' on the embedded store" >&2
exec "$bin" simulate --config examples/floodgate.yaml --rule login --input examples/traffic.csv
