#!/usr/bin/env bash
# Installs every Debian 12 package floodgate needs to build, test and
# benchmark, and the npm packages of the browser tests and the Node.js
# client. Idempotent: does nothing when all are present.
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
  python3 python3-pytest python3-redis python3-jwt python3-cryptography redis-server redis-tools redis-sentinel nutcracker nginx-light
  curl wrk
  # the graceful restart test's own network namespace (unshare is util-linux)
  iproute2 util-linux procps
  nodejs
  # the Python client's tests (clients/python): the frameworks it serves,
  # and pip to build its wheel
  python3-flask python3-starlette python3-uvicorn python3-pip python3-setuptools python3-wheel
  # the dashboard's browser tests (tests/browser): headless Chromium
  chromium
  # the .deb (cmake/packaging.cmake) and its test (tests/package): the
  # package's dependencies from dpkg-shlibdeps, its maintainer scripts'
  # adduser, systemd-analyze for the unit, setpriv, pgrep, objdump
  dpkg-dev adduser systemd util-linux procps binutils
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Some nodejs builds bundle npm (and conflict with Debian's npm package):
# ask for npm only when the command is missing.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages, installed from each lock file once, again only when the
# lock file changes: the browser tests' (puppeteer-core, which drives
# Debian's chromium and downloads no browser of its own), and the Node.js
# client's build and test tools (typescript, express, express-rate-limit).
for npm_dir in tests/browser clients/node; do
  dir="$(dirname "$0")/../$npm_dir"
  if [[ ! -f "$dir/node_modules/.package-lock.json" ||
        "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]]; then
    echo "setup: npm ci in $npm_dir" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
done
