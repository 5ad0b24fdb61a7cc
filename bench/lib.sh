# shellcheck shell=bash
# shellcheck disable=SC2034  # globals (REDIS_PORT, NGINX_CMD, ...) are read by the scripts
# Shared helpers for the bench/*.sh scripts. Source it, then call bench_init.
#
# Everything a script starts (servers, load tools) is registered here and
# stopped at exit, whether the script ends normally, fails, or is
# interrupted (Ctrl-C, SIGTERM, SIGHUP). A watchdog also stops them if the
# script itself is killed with SIGKILL. Processes are stopped by their own
# ids (and their children's): nothing else on the machine is touched.
#
# Servers listen on 127.0.0.1 only. Temp files live in one directory,
# removed at exit (kept if BENCH_KEEP_TMP=1).
#
# Binaries: FLOODGATE_BIN and LOADGEN_BIN override the defaults below.
#
# TLS: bench_make_tls_cert makes a throwaway CA and a server certificate
# for 127.0.0.1; BENCH_FLOODGATE_TLS=1 and BENCH_NGINX_TLS=1 then start
# floodgate (RESP and HTTP) and nginx serving TLS with it.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$BENCH_DIR/.." && pwd)
FLOODGATE_BIN=${FLOODGATE_BIN:-$REPO_ROOT/build/bench/floodgate}
LOADGEN_BIN=${LOADGEN_BIN:-$REPO_ROOT/build/bench/bench/loadgen}
RLS_LOADGEN_BIN=${RLS_LOADGEN_BIN:-$REPO_ROOT/build/bench/bench/rls_loadgen}
BENCH_BUILD_CMD='cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" -DFLOODGATE_BUILD_TESTS=OFF && ninja -C build/bench -j2 floodgate_cli loadgen rls_loadgen'

# Where processes run (--server-cpus, --client-cpus; see "CPU placement"
# below). Empty: anywhere, as the scheduler likes.
BENCH_SERVER_CPUS=${BENCH_SERVER_CPUS:-}
BENCH_CLIENT_CPUS=${BENCH_CLIENT_CPUS:-}

BENCH_TMP=""
_BENCH_PORTS=()      # ports handed out by bench_free_port
_BENCH_WATCHDOG=""
_BENCH_LOGS=()       # server logs, shown on failure

# Messages go to the script's original stderr (saved by bench_init), also
# from inside functions whose stderr is redirected.
BENCH_STDERR=2
bench_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&"$BENCH_STDERR"; }
bench_die() {
  bench_log "error: $*"
  # A server that died explains most failures: say so.
  local name pid
  for name in redis-server:${REDIS_PID:-} floodgate:${FLOODGATE_PID:-} nginx:${NGINX_PID:-}; do
    pid=${name#*:}
    if [[ -n $pid ]] && ! _bench_alive "$pid"; then
      bench_log "note: ${name%%:*} (pid $pid) is not running any more"
    fi
  done
  exit 1
}

# bench_init: temp dir, traps, watchdog. Call once, before starting anything.
bench_init() {
  exec {BENCH_STDERR}>&2
  BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/floodgate-bench.XXXXXX")
  : >"$BENCH_TMP/pids"
  trap _bench_on_exit EXIT
  trap '_bench_on_signal INT 130' INT
  trap '_bench_on_signal TERM 143' TERM
  trap '_bench_on_signal HUP 129' HUP
  _bench_start_watchdog
}

_BENCH_SIGNALLED=0
_bench_on_signal() {
  _BENCH_SIGNALLED=1
  bench_log "caught SIG$1: stopping everything this script started"
  exit "$2"  # runs _bench_on_exit
}

_bench_on_exit() {
  local rc=$?
  trap - EXIT INT TERM HUP
  # A second Ctrl-C during cleanup must not leave processes behind.
  trap '' INT TERM HUP
  bench_stop_all
  if [[ $rc -ne 0 && $_BENCH_SIGNALLED == 0 ]]; then
    local log
    for log in "${_BENCH_LOGS[@]}"; do
      if [[ -s $log ]]; then
        bench_log "last lines of $log:"
        tail -n 5 "$log" | sed 's/^/    /' >&"$BENCH_STDERR"
      fi
    done
  fi
  if [[ -n $_BENCH_WATCHDOG ]]; then
    kill -TERM "$_BENCH_WATCHDOG" 2>/dev/null || true
    wait "$_BENCH_WATCHDOG" 2>/dev/null || true
  fi
  if [[ -n $BENCH_TMP && -d $BENCH_TMP ]]; then
    if [[ ${BENCH_KEEP_TMP:-0} == 1 ]]; then
      bench_log "kept $BENCH_TMP"
    else
      rm -rf -- "$BENCH_TMP"
    fi
  fi
  exit "$rc"
}

# The watchdog polls this shell; if it disappears without cleaning up
# (SIGKILL), the watchdog stops what is listed in $BENCH_TMP/pids.
_bench_start_watchdog() {
  local parent=$$ tmp=$BENCH_TMP
  (
    set +eu  # inherited from the script; nothing here may stop the cleanup
    trap '' INT HUP
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    nap=""
    while kill -0 "$parent" 2>/dev/null; do
      sleep 1 &
      nap=$!
      wait "$nap"
    done
    if [[ -s $tmp/pids ]]; then
      # shellcheck disable=SC2046
      kill -TERM $(cat "$tmp/pids") 2>/dev/null
      sleep 2
      # shellcheck disable=SC2046
      kill -KILL $(cat "$tmp/pids") 2>/dev/null
    fi
    rm -rf -- "$tmp"
  ) </dev/null >/dev/null 2>&1 &
  _BENCH_WATCHDOG=$!
}

# Registered processes live in $BENCH_TMP/pids, one a line, so that a
# registration made in a subshell is seen by the cleanup too.
_bench_register() {
  echo "$1" >>"$BENCH_TMP/pids"
}

_bench_unregister() {
  local rest
  rest=$(grep -vx -- "$1" "$BENCH_TMP/pids" 2>/dev/null || true)
  if [[ -n $rest ]]; then printf '%s\n' "$rest" >"$BENCH_TMP/pids"; else : >"$BENCH_TMP/pids"; fi
}

# True while pid $1 runs (a zombie, exited but not yet reaped, does not count).
_bench_alive() {
  [[ -r /proc/$1/status ]] || return 1
  ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

_bench_descendants() {
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do
    echo "$c"
    _bench_descendants "$c"
  done
}

# bench_stop PID: SIGTERM to it and its descendants, SIGKILL after 5 s.
bench_stop() {
  local pid=$1 all p i alive=0
  if _bench_alive "$pid"; then
    all="$pid $(_bench_descendants "$pid")"
    # shellcheck disable=SC2086
    kill -TERM $all 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      alive=0
      for p in $all; do _bench_alive "$p" && alive=1; done
      ((alive)) || break
      sleep 0.1
    done
    if ((alive)); then
      bench_log "pid $pid did not stop on SIGTERM within 5 s; sending SIGKILL"
      # shellcheck disable=SC2086
      kill -KILL $all 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
  _bench_unregister "$pid"
}

# Stops every registered process, the most recent first.
bench_stop_all() {
  [[ -n $BENCH_TMP && -f $BENCH_TMP/pids ]] || return 0
  local pid
  for pid in $(tac "$BENCH_TMP/pids"); do bench_stop "$pid"; done
}

# bench_spawn LOG CMD...: starts CMD in the background (stdout and stderr to
# LOG), registered for cleanup. Sets BENCH_SPAWNED_PID. The process gets a
# session of its own, so that a Ctrl-C reaches the script (whose trap then
# stops everything in order) and not the servers directly. (setsid execs in
# place here: a background job of a shell without job control is not a
# process group leader, so the pid stays the server's.)
#
# BENCH_SPAWN_ROLE=server|client (default server) picks the CPU list the
# process is pinned to (bench_pin).
bench_spawn() {
  local log=$1
  shift
  bench_pin "${BENCH_SPAWN_ROLE:-server}"
  if command -v setsid >/dev/null 2>&1; then
    setsid "${BENCH_PIN[@]}" "$@" </dev/null >"$log" 2>&1 &
  else
    "${BENCH_PIN[@]}" "$@" </dev/null >"$log" 2>&1 &
  fi
  BENCH_SPAWNED_PID=$!
  _bench_register "$BENCH_SPAWNED_PID"
}

# bench_run SECONDS OUT CMD...: runs a load tool, killed after SECONDS, with
# stdout to OUT. Its stderr is shown afterwards, less the lines matching the
# extended regex in BENCH_RUN_QUIET if set. Waits for it in a way that lets
# Ctrl-C and SIGTERM reach the traps at once. Returns its exit status. The
# tool runs on the client CPUs (bench_pin).
bench_run() {
  local limit=$1 out=$2 pid rc=0
  shift 2
  bench_pin client
  # timeout puts the tool in a process group of its own: a Ctrl-C reaches
  # the script, whose trap stops the tool.
  timeout -k 5 "$limit" "${BENCH_PIN[@]}" "$@" </dev/null >"$out" 2>"$out.stderr" &
  pid=$!
  _bench_register "$pid"
  wait "$pid" || rc=$?
  _bench_unregister "$pid"
  if [[ -s $out.stderr ]]; then
    if [[ -n ${BENCH_RUN_QUIET:-} ]]; then
      grep -Ev -- "$BENCH_RUN_QUIET" "$out.stderr" >&"$BENCH_STDERR" || true
    else
      cat "$out.stderr" >&"$BENCH_STDERR"
    fi
  fi
  if ((rc == 124)); then bench_log "$1 timed out after ${limit}s and was killed"; fi
  return "$rc"
}

# bench_quote ARG...: the words, shell-quoted where needed, for printing a
# command that can be pasted back into a shell.
bench_quote() {
  local a words=()
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then
      words+=("$a")
    else
      words+=("'${a//\'/\'\\\'\'}'")
    fi
  done
  echo "${words[*]}"
}

# bench_require CMD...: fails unless every command exists.
bench_require() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || bench_die "'$c' is not installed (needed by this script)"
  done
}

bench_require_floodgate() {
  [[ -x $FLOODGATE_BIN ]] || bench_die "no floodgate binary at $FLOODGATE_BIN; build it from $REPO_ROOT with:
  $BENCH_BUILD_CMD
(or set FLOODGATE_BIN)"
}

bench_require_loadgen() {
  [[ -x $LOADGEN_BIN ]] || bench_die "no loadgen binary at $LOADGEN_BIN; build it from $REPO_ROOT with:
  $BENCH_BUILD_CMD
(or set LOADGEN_BIN)"
}

# bench_free_port: sets BENCH_FREE_PORT to a TCP port nothing uses, below the
# usual ephemeral range, not handed out before by this script. (Another
# program could still take it before we bind; the start functions retry.)
bench_free_port() {
  local p i used
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 12000))
    used=0
    for u in "${_BENCH_PORTS[@]}"; do [[ $u == "$p" ]] && used=1; done
    ((used)) && continue
    if ss -Htan "( sport = :$p )" 2>/dev/null | grep -q .; then continue; fi
    _BENCH_PORTS+=("$p")
    BENCH_FREE_PORT=$p
    return 0
  done
  bench_die "found no free TCP port"
}

# bench_wait_tcp PORT SECONDS PID: waits until 127.0.0.1:PORT accepts
# connections; fails early if PID exits.
bench_wait_tcp() {
  local port=$1 secs=$2 pid=$3 i
  for ((i = 0; i < secs * 20; i++)); do
    _bench_alive "$pid" || return 1
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  return 1
}

# ---------------------------------------------------------------------------
# TLS. bench_make_tls_cert: a throwaway CA and a server certificate for
# 127.0.0.1 and localhost (EC P-256, as docs/operations.md "TLS" makes
# them), in $BENCH_TMP/tls. Sets BENCH_TLS_CA, BENCH_TLS_CERT, BENCH_TLS_KEY
# and BENCH_TLS_CMDS (the openssl commands, for the report).
bench_make_tls_cert() {
  bench_require openssl
  local dir=$BENCH_TMP/tls cmd
  mkdir -p "$dir"
  BENCH_TLS_CMDS=(
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=floodgate-bench-ca"
    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr -subj /CN=localhost"
    "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext"
    "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out server.pem -extfile server.ext"
  )
  for cmd in "${BENCH_TLS_CMDS[@]}"; do
    (cd "$dir" && eval "$cmd") >"$dir/openssl.log" 2>&1 ||
      bench_die "making the test certificate failed: $cmd: $(tail -n 3 "$dir/openssl.log")"
  done
  BENCH_TLS_CA=$dir/ca.pem
  BENCH_TLS_CERT=$dir/server.pem
  BENCH_TLS_KEY=$dir/server.key
}

# bench_tls_session HOST:PORT: "TLSv1.3 TLS_AES_256_GCM_SHA384", what an
# OpenSSL client negotiates with the server there (verified against the CA).
bench_tls_session() {
  timeout 10 openssl s_client -connect "$1" -CAfile "$BENCH_TLS_CA" -verify_return_error </dev/null 2>/dev/null |
    awk '/^New, / { sub(/,$/, "", $2); p = $2; c = $NF } END { if (p == "") print "no TLS session"; else print p, c }'
}

# ---------------------------------------------------------------------------
# CPU placement, and what a process spent.
#
# Every script takes --server-cpus LIST and --client-cpus LIST (taskset
# lists, "0" or "2-3"; or BENCH_SERVER_CPUS / BENCH_CLIENT_CPUS). The
# servers measured (floodgate, and a server it is compared with: nginx, a
# redis-server answering INCR) run on the server list; the load tools, and a
# redis-server that is only floodgate's store, on the client list. On a
# 2-core host: --server-cpus 0 --client-cpus 1, so that the load never
# takes the server's core and the server's CPU time is its own.
#
# What a server spent is its CPU time over a run, all threads, read before
# and after (bench_cpu_ns: /proc/PID/task/*/schedstat, nanoseconds;
# bench_redis_cpu_us: redis-server's INFO cpu, all its threads), divided by
# the decisions it made: CPU per decision holds where a shared host moves
# throughput by 10-30 % between runs.

# bench_cpu_arg ARG VALUE: in a script's argument loop, takes --server-cpus
# or --client-cpus with its value; false for any other ARG.
bench_cpu_arg() {
  case $1 in
    --server-cpus) BENCH_SERVER_CPUS=${2:?--server-cpus needs a CPU list} ;;
    --client-cpus) BENCH_CLIENT_CPUS=${2:?--client-cpus needs a CPU list} ;;
    *) return 1 ;;
  esac
  [[ $2 =~ ^[0-9]+([-,][0-9]+)*$ ]] || bench_die "$1 takes a CPU list such as 0, 0-1 or 0,2"
}

# bench_pin ROLE (server|client): sets BENCH_PIN to the command words that
# pin a process to ROLE's CPUs (taskset -c LIST), or to none.
bench_pin() {
  local list
  case $1 in
    server) list=$BENCH_SERVER_CPUS ;;
    client) list=$BENCH_CLIENT_CPUS ;;
    *) bench_die "bench_pin: no role $1" ;;
  esac
  BENCH_PIN=()
  if [[ -n $list ]]; then
    bench_require taskset
    BENCH_PIN=(taskset -c "$list")
  fi
}

# bench_cpu_placement: one line for the report, saying where each side ran.
bench_cpu_placement() {
  echo "server CPUs: ${BENCH_SERVER_CPUS:-any}, client CPUs (load tools, a store's redis-server): ${BENCH_CLIENT_CPUS:-any}"
}

# bench_cpu_ns PID: nanoseconds of CPU the process's threads have run, all
# of them (a thread that has exited is no longer counted: the servers here
# keep theirs for their lifetime).
bench_cpu_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ t += $1 } END { printf "%.0f\n", t }'
}

# bench_cpu_ns_tree PID: bench_cpu_ns of PID and of its descendants (nginx:
# the master and its workers).
bench_cpu_ns_tree() {
  local p t=0
  for p in "$1" $(_bench_descendants "$1"); do t=$((t + $(bench_cpu_ns "$p"))); done
  echo "$t"
}

# bench_redis_cpu_us PORT: microseconds of CPU the redis-server on PORT has
# spent, user and system, all threads (INFO cpu).
bench_redis_cpu_us() {
  timeout 10 redis-cli -h 127.0.0.1 -p "$1" INFO cpu | tr -d '\r' | awk -F: '
    $1 == "used_cpu_sys" || $1 == "used_cpu_user" { t += $2 } END { printf "%.0f\n", t * 1e6 }'
}

# bench_per ns|us TOTAL N: TOTAL (nanoseconds or microseconds) over N, in
# microseconds with two decimals ("n/a" when N is 0).
bench_per() {
  awk -v unit="$1" -v t="$2" -v n="$3" 'BEGIN {
    if (n + 0 == 0) { print "n/a"; exit }
    printf "%.2f\n", (unit == "ns" ? t / 1000 : t) / n }'
}

# ---------------------------------------------------------------------------
# redis-server. Sets REDIS_PID, REDIS_PORT, REDIS_CMD. bench_start_redis
# [server|client]: the CPUs it runs on (default client: floodgate's store;
# server where redis-server is the server compared).
bench_start_redis() {
  bench_require redis-server redis-cli
  local role=${1:-client} attempt port log
  for attempt in 1 2 3; do
    bench_free_port
    port=$BENCH_FREE_PORT
    log=$BENCH_TMP/redis-$port.log
    local -a argv=(redis-server --save "" --appendonly no --port "$port" --bind 127.0.0.1
      --daemonize no --logfile "$log" --dir "$BENCH_TMP")
    REDIS_CMD=$(bench_quote "${argv[@]}")
    BENCH_SPAWN_ROLE=$role bench_spawn "$BENCH_TMP/redis-$port.out" "${argv[@]}"
    REDIS_PID=$BENCH_SPAWNED_PID
    _BENCH_LOGS+=("$log")
    local i
    for ((i = 0; i < 100; i++)); do
      _bench_alive "$REDIS_PID" || break
      if [[ $(timeout 5 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; then
        REDIS_PORT=$port
        bench_log "redis-server pid $REDIS_PID on 127.0.0.1:$port"
        return 0
      fi
      sleep 0.1
    done
    bench_log "redis-server did not come up on port $port (attempt $attempt)"
    bench_stop "$REDIS_PID"
  done
  bench_die "could not start redis-server"
}

# ---------------------------------------------------------------------------
# floodgate. bench_start_floodgate THREADS [STORE_URL] (THREADS 0: the default). Sets FLOODGATE_PID,
# FLOODGATE_RESP_PORT, FLOODGATE_HTTP_PORT, FLOODGATE_HTTP_URL (http://, or
# https:// with TLS), FLOODGATE_CMD, FLOODGATE_CONFIG.
# With STORE_URL (redis://127.0.0.1:PORT), state lives there (--store), with
# the request timeout BENCH_FLOODGATE_REDIS_TIMEOUT_MS if set.
# BENCH_FLOODGATE_TLS=1: RESP and HTTP serve TLS with bench_make_tls_cert's
# certificate (tls and listen_tls in the config). BENCH_FLOODGATE_NAME (default
# floodgate) names the config and the log, for a script that starts two.
bench_write_floodgate_config() {
  FLOODGATE_CONFIG=$BENCH_TMP/${BENCH_FLOODGATE_NAME:-floodgate}.yaml
  {
    echo "# Written by bench/lib.sh."
    echo "store: memory"
    if [[ ${BENCH_FLOODGATE_TLS:-0} == 1 ]]; then
      [[ -n ${BENCH_TLS_CERT:-} ]] || bench_die "BENCH_FLOODGATE_TLS=1 needs bench_make_tls_cert first"
      echo "tls: { cert_file: $BENCH_TLS_CERT, key_file: $BENCH_TLS_KEY }"
      echo "listen_tls: { resp: true, http: true }"
    fi
    if [[ -n ${BENCH_FLOODGATE_REDIS_TIMEOUT_MS:-} ]]; then
      echo "redis: { timeout_ms: $BENCH_FLOODGATE_REDIS_TIMEOUT_MS }"
    fi
    # More top-level sections from the calling script (e.g. envoy_ratelimit).
    if [[ -n ${BENCH_FLOODGATE_EXTRA_CONFIG:-} ]]; then
      printf '%s\n' "$BENCH_FLOODGATE_EXTRA_CONFIG"
    fi
  } >"$FLOODGATE_CONFIG"
  cat >>"$FLOODGATE_CONFIG" <<'EOF'
rules:
  # Never denies: measures the cost of a decision.
  bench:
    algorithm: fixed_window
    limits: [1000000000/minute]
  # Seed 004's anti-spam counters: denies often.
  spam:
    algorithm: fixed_window
    limits: [10/minute, 100/hour, 500/day]
EOF
}

bench_start_floodgate() {
  local threads=$1 store=${2:-} log i line
  bench_require_floodgate
  bench_write_floodgate_config
  log=$BENCH_TMP/${BENCH_FLOODGATE_NAME:-floodgate}.log
  local -a argv=("$FLOODGATE_BIN" serve --config "$FLOODGATE_CONFIG" --resp 127.0.0.1:0
    --http 127.0.0.1:0)
  # THREADS 0: floodgate's own default, as a user who sets nothing gets it.
  if ((threads > 0)); then argv+=(--threads "$threads"); fi
  if [[ -n $store ]]; then argv+=(--store "$store"); fi
  # BENCH_FLOODGATE_GRPC=1: the Envoy gRPC front too (FLOODGATE_GRPC_PORT).
  if [[ ${BENCH_FLOODGATE_GRPC:-0} == 1 ]]; then argv+=(--grpc 127.0.0.1:0); fi
  FLOODGATE_CMD=$(bench_quote "${argv[@]}")
  bench_spawn "$log" "${argv[@]}"
  FLOODGATE_PID=$BENCH_SPAWNED_PID
  _BENCH_LOGS+=("$log")
  for ((i = 0; i < 200; i++)); do
    line=$(grep -m1 'msg=listening' "$log" 2>/dev/null || true)
    [[ -n $line ]] && break
    _bench_alive "$FLOODGATE_PID" || bench_die "floodgate exited at startup: $(tail -n 3 "$log")"
    sleep 0.05
  done
  [[ -n $line ]] || bench_die "floodgate did not log msg=listening within 10 s"
  FLOODGATE_RESP_PORT=$(sed -n 's/.* resp=[^ ]*:\([0-9][0-9]*\).*/\1/p' <<<"$line")
  FLOODGATE_HTTP_PORT=$(sed -n 's/.* http=[^ ]*:\([0-9][0-9]*\).*/\1/p' <<<"$line")
  [[ -n $FLOODGATE_RESP_PORT && -n $FLOODGATE_HTTP_PORT ]] ||
    bench_die "cannot parse the ports from: $line"
  FLOODGATE_GRPC_PORT=$(sed -n 's/.* grpc=[^ ]*:\([0-9][0-9]*\).*/\1/p' <<<"$line")
  FLOODGATE_HTTP_URL=http://127.0.0.1:$FLOODGATE_HTTP_PORT
  if [[ ${BENCH_FLOODGATE_TLS:-0} == 1 ]]; then
    [[ $line == *" tls=resp,http"* ]] || bench_die "floodgate was asked for TLS on RESP and HTTP but says: $line"
    FLOODGATE_HTTP_URL=https://127.0.0.1:$FLOODGATE_HTTP_PORT
  fi
  bench_wait_tcp "$FLOODGATE_RESP_PORT" 5 "$FLOODGATE_PID" || bench_die "floodgate RESP port not reachable"
  bench_wait_tcp "$FLOODGATE_HTTP_PORT" 5 "$FLOODGATE_PID" || bench_die "floodgate HTTP port not reachable"
  local tls=""
  if [[ ${BENCH_FLOODGATE_TLS:-0} == 1 ]]; then tls=", TLS"; fi
  bench_log "floodgate pid $FLOODGATE_PID: resp 127.0.0.1:$FLOODGATE_RESP_PORT http 127.0.0.1:$FLOODGATE_HTTP_PORT threads $threads${store:+ store $store}$tls"
}

# bench_curl ARG...: curl, trusting bench_make_tls_cert's CA when there is one.
bench_curl() {
  local -a ca=()
  if [[ -n ${BENCH_TLS_CA:-} ]]; then ca=(--cacert "$BENCH_TLS_CA"); fi
  curl "${ca[@]}" "$@"
}

# bench_floodgate_decisions RULE [BASE_URL]: prints "allowed denied" from
# /metrics (of FLOODGATE_HTTP_URL, or BASE_URL: http://... or https://...).
bench_floodgate_decisions() {
  bench_curl -s --max-time 5 "${2:-$FLOODGATE_HTTP_URL}/metrics" | awk -v rule="$1" '
    index($0, "floodgate_decisions_total{rule=\"" rule "\",outcome=\"allowed\"}") == 1 { a = $2 }
    index($0, "floodgate_decisions_total{rule=\"" rule "\",outcome=\"denied\"}") == 1 { d = $2 }
    END { printf "%d %d\n", a, d }'
}

# ---------------------------------------------------------------------------
# nginx: limit_req keyed by $arg_key that never rejects, in front of a tiny
# static reply. bench_start_nginx WORKERS. Sets NGINX_PID, NGINX_PORT,
# NGINX_URL, NGINX_CMD, NGINX_CONF. BENCH_NGINX_TLS=1: HTTPS with
# bench_make_tls_cert's certificate (NGINX_URL https://...).
#
# Why empty_gif and not "return 204": return runs in nginx's rewrite phase,
# which comes before the preaccess phase where limit_req runs, so
# "limit_req ...; return 204;" never consults limit_req at all. empty_gif is
# a content-phase handler (200, 43-byte body), so every request does pass
# through limit_req. bench_start_nginx checks this with a probe location.
bench_start_nginx() {
  local workers=$1 attempt port dir i
  bench_require nginx curl
  local nginx_bin scheme=http ssl="" tls_conf=""
  nginx_bin=$(command -v nginx)
  if [[ ${BENCH_NGINX_TLS:-0} == 1 ]]; then
    [[ -n ${BENCH_TLS_CERT:-} ]] || bench_die "BENCH_NGINX_TLS=1 needs bench_make_tls_cert first"
    scheme=https
    ssl=" ssl"
    # As floodgate: TLS 1.2 and 1.3 only, the library's default ciphers.
    tls_conf="ssl_certificate $BENCH_TLS_CERT;
    ssl_certificate_key $BENCH_TLS_KEY;
    ssl_protocols TLSv1.2 TLSv1.3;"
  fi
  for attempt in 1 2 3; do
    bench_free_port
    port=$BENCH_FREE_PORT
    dir=$BENCH_TMP/nginx-$port
    mkdir -p "$dir/tmp"
    NGINX_CONF=$dir/nginx.conf
    cat >"$NGINX_CONF" <<EOF
# Written by bench/lib.sh.
worker_processes $workers;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000000;  # wrk and loadgen keep their connections
  keepalive_timeout 300s;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  limit_req_zone \$arg_key zone=z:64m rate=100000000r/s;
  limit_req_zone \$arg_key zone=probe:1m rate=1r/m;
  server {
    listen 127.0.0.1:$port$ssl;${tls_conf:+
    $tls_conf}
    location / {
      limit_req zone=z burst=1000000 nodelay;
      empty_gif;
    }
    # Proves limit_req runs in front of this kind of handler: the second
    # request within a minute must be rejected (503).
    location = /__limit_req_probe {
      limit_req zone=probe;
      empty_gif;
    }
  }
}
EOF
    local -a argv=("$nginx_bin" -p "$dir/" -e "$dir/error.log" -c "$NGINX_CONF")
    NGINX_CMD=$(bench_quote "${argv[@]}")
    bench_spawn "$dir/stderr.log" "${argv[@]}"
    NGINX_PID=$BENCH_SPAWNED_PID
    _BENCH_LOGS+=("$dir/error.log")
    if bench_wait_tcp "$port" 10 "$NGINX_PID"; then
      NGINX_PORT=$port
      NGINX_URL=$scheme://127.0.0.1:$port
      local first second
      first=$(bench_curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$NGINX_URL/__limit_req_probe?key=p")
      second=$(bench_curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$NGINX_URL/__limit_req_probe?key=p")
      [[ $first == 200 && $second == 503 ]] ||
        bench_die "nginx limit_req probe answered $first then $second (expected 200 then 503)"
      i=$(bench_curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$NGINX_URL/v1/check?rule=bench&key=key:1")
      [[ $i == 200 ]] || bench_die "nginx answered $i to a benchmark request"
      bench_log "nginx pid $NGINX_PID on $NGINX_URL, $workers worker(s); limit_req probe ok"
      return 0
    fi
    bench_log "nginx did not come up on port $port (attempt $attempt): $(tail -n 2 "$dir/error.log" 2>/dev/null)"
    bench_stop "$NGINX_PID"
  done
  bench_die "could not start nginx"
}

# ---------------------------------------------------------------------------
# Numbers and facts.

# bench_median V...: the median (mean of the middle two for an even count).
bench_median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
          else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_ratio A B [DECIMALS]: A/B with two decimals, or DECIMALS ("n/a" if B
# is 0 or not a number).
bench_ratio() {
  awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%." d "f\n", a / b }'
}

# bench_fmt_int V: rounds to an integer.
bench_fmt_int() { awk -v v="$1" 'BEGIN { printf "%.0f\n", v }'; }

# bench_wrk_us VALUE: wrk's "123.45us" / "1.20ms" / "1.01s" to microseconds.
bench_wrk_us() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) m = 1; else if (v ~ /ms$/) m = 1000; else if (v ~ /m$/) m = 60e6;
    else if (v ~ /s$/) m = 1e6; else m = 1;
    sub(/[a-z]+$/, "", v); printf "%.0f\n", v * m }'
}

bench_machine_facts() {
  local cpu
  cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- nproc: $(nproc)"
  echo "- cpu: ${cpu:-unknown}"
  echo "- kernel: $(uname -srm)"
  echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  if command -v redis-server >/dev/null; then echo "- $(redis-server --version)"; fi
  if command -v nginx >/dev/null; then echo "- $(nginx -v 2>&1)"; fi
  if command -v wrk >/dev/null; then echo "- $(wrk -v 2>&1 | head -n 1 | sed 's/ Copyright.*//')"; fi
  if [[ -x $FLOODGATE_BIN ]]; then
    echo "- $("$FLOODGATE_BIN" --version 2>&1 | head -n 1) ($FLOODGATE_BIN, built $(date -u -r "$FLOODGATE_BIN" +%Y-%m-%dT%H:%M:%SZ))"
    # The source line below describes the tree now, not the binary: flag a
    # binary older than the sources it is built from.
    local newer
    newer=$(find "$REPO_ROOT/src" "$REPO_ROOT/include" "$REPO_ROOT/CMakeLists.txt" -type f \
      -newer "$FLOODGATE_BIN" 2>/dev/null | head -n 1)
    if [[ -n $newer ]]; then
      echo "- WARNING: ${newer#"$REPO_ROOT"/} changed after the binary was built: rebuild to measure the current sources"
      bench_log "WARNING: $FLOODGATE_BIN is older than ${newer#"$REPO_ROOT"/}; rebuild to measure the current sources"
    fi
  fi
  if command -v git >/dev/null && git -C "$REPO_ROOT" rev-parse HEAD >/dev/null 2>&1; then
    echo "- source: $(git -C "$REPO_ROOT" describe --always --dirty 2>/dev/null)"
  fi
}

# Prints the running script's header comment and exits with $1: the whole
# header on stdout for --help (0), from its "# usage:" line on stderr for a
# bad argument.
bench_usage() {
  if (($1 == 0)); then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  else
    sed -n '/^# usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  fi
  exit "$1"
}
