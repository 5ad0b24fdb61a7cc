#!/usr/bin/env bash
# Builds floodgate (release preset) on a fresh Debian 12 machine and serves
# examples/floodgate.yaml on the embedded store: Redis protocol on
# 127.0.0.1:6479, HTTP on 127.0.0.1:8080. Ctrl-C stops it. Extra arguments go
# to `floodgate serve` (e.g. --threads 2, --http 127.0.0.1:9090).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target floodgate_cli >&2
# The example's otp section needs a secret. A fresh one per run will do for
# trying it out (codes do not outlive a restart then); set your own to keep one.
if [[ -z "${FG_OTP_SECRET:-}" ]]; then
  FG_OTP_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n")
  export FG_OTP_SECRET
  echo "FG_OTP_SECRET was not set: using a random one for this run" >&2
fi
cat >&2 <<'TXT'
floodgate is starting. Try:
  redis-cli -p 6479 FG.CHECK api user:42
  redis-cli -p 6479 CL.THROTTLE user:42 15 30 60
  curl -i -X POST localhost:8080/v1/check -d '{"rule":"api","key":"user:42"}'
  redis-cli -p 6479 FG.SADD devices:42 laptop 60000
  curl -X POST localhost:8080/v1/otp/issue -d '{"subject":"+15550100"}'
  curl localhost:8080/metrics
TXT
exec build/release/floodgate serve --config examples/floodgate.yaml "$@"
