#!/usr/bin/env bash
# What a decision costs Redis inside floodgate's batched script, step by
# step (bench/redis_script_costs.py says how), on a redis-server of its own
# pinned to --server-cpus, the Python client on --client-cpus.
#
# usage: bench/redis_script_costs.sh [--keys N] [--calls N] [--repeats N]
#                                    [--server-cpus LIST] [--client-cpus LIST]
set -euo pipefail
source "$(dirname "$0")/lib.sh"

args=()
while (($#)); do
  if bench_cpu_arg "$1" "${2:-}"; then shift 2; continue; fi
  case $1 in
    --keys | --calls | --repeats) args+=("$1" "${2:?$1 needs a number}"); shift 2 ;;
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bench_die "unknown argument $1 (see --help)" ;;
  esac
done
# Debian's Python, where scripts/setup.sh installs python3-redis (a python3
# of pyenv's or a venv's earlier on PATH would not have it).
py=${BENCH_PYTHON:-/usr/bin/python3}
"$py" -c 'import redis' 2>/dev/null || bench_die "$py cannot import redis (scripts/setup.sh installs python3-redis)"
bench_init
bench_start_redis server
bench_pin client
"${BENCH_PIN[@]}" "$py" "$BENCH_DIR/redis_script_costs.py" --port "$REDIS_PORT" "${args[@]}"
