#!/usr/bin/env bash
# Installs a built tree into a temporary prefix and builds examples/embed
# against it with find_package(floodgate), then runs it: proves the CMake
# package and the installed headers work for a consumer outside the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build/release}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
cmake -S examples/embed -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/embed_example"
