#!/usr/bin/env bash
# Installs every Debian 12 package floodgate needs to build, test and
# benchmark. Idempotent: does nothing when all are present.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ cmake ninja-build ccache pkg-config git
  # libraries
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev tzdata
  # the Redis store: RESP reader (hiredis), TLS and SHA-1 (OpenSSL)
  libhiredis-dev libssl-dev
  # Envoy's rate limit service: gRPC++, protobuf and their code generators
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # fuzzing: clang with libFuzzer and the sanitizer runtimes
  clang-14 libclang-rt-14-dev
  # real peers the integration tests and benchmarks drive
  python3 python3-pytest python3-redis redis-server redis-tools nutcracker nginx-light curl wrk
  nodejs
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Some nodejs builds bundle npm (and conflict with Debian's npm package):
# ask for npm only when the command is missing.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
