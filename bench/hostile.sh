#!/usr/bin/env bash
# Hostile and careless clients against `floodgate serve` (embedded store,
# default settings, 2 event loops, 127.0.0.1 only): a client that never
# reads its replies, SIGTERM with one attached, slowloris, an idle flood
# past max_connections, clients past the open-file limit, and an idle
# server. Prints a markdown report: one column per binary, so a build from
# before a change and one from after it compare side by side in one run.
#
# usage: bench/hostile.sh [--before BIN] [--quick]
#   --before  another floodgate binary (e.g. built from the previous
#             commit), measured first, in its own column
#   --quick   smaller, shorter floods (about 1 minute per binary)
# The binary measured is $FLOODGATE_BIN (default build/bench/floodgate).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

before=""
quick=()
while (($#)); do
  case $1 in
    --before) before=${2:?--before needs a binary}; shift 2 ;;
    --quick) quick=(--quick); shift ;;
    -h | --help) bench_usage 0 ;;
    *) echo "unknown argument: $1" >&2; bench_usage 2 ;;
  esac
done
bench_require python3 prlimit
bench_require_floodgate
[[ -z $before || -x $before ]] || bench_die "--before $before is not an executable"
started=$SECONDS
facts=$(bench_machine_facts)

argv=(python3 "$REPO_ROOT/bench/hostile.py" "${quick[@]}")
if [[ -n $before ]]; then
  argv+=(--floodgate "$before" --label "before ($(basename "$before"))")
fi
argv+=(--floodgate "$FLOODGATE_BIN" --label "this build")
table=$("${argv[@]}")

echo "## Hostile clients ($(date -u +%Y-%m-%d))"
echo
echo "$facts"
echo
echo "$table"
echo
echo "Command:"
echo
echo '```'
bench_quote "${argv[@]}"
echo '```'
echo
echo "Elapsed: $((SECONDS - started)) s"
