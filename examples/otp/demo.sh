#!/usr/bin/env bash
# One-time passwords with curl against a real floodgate: issue a code, try a
# wrong one, the right one, then the right one again (a replay). Then the
# expiring set underneath seed 001's idea: members with their own TTLs.
#
#   examples/otp/demo.sh                      # uses build/release/floodgate
#   FLOODGATE_BIN=/usr/local/bin/floodgate examples/otp/demo.sh
#
# Starts its own server on free ports (embedded store, examples/otp/otp.yaml)
# with a random OTP secret, and stops it at the end.
set -euo pipefail
# FLOODGATE_BIN relative to where the script was started from, not the root.
bin=${FLOODGATE_BIN:+$(realpath -m -- "$FLOODGATE_BIN")}
cd "$(dirname "$0")/../.."
bin=${bin:-build/release/floodgate}
[[ -x "$bin" ]] || { echo "no floodgate binary at $bin (build it, or set FLOODGATE_BIN)" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }

log=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
FG_OTP_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n') \
  "$bin" serve --config examples/otp/otp.yaml --http 127.0.0.1:0 --resp 127.0.0.1:0 \
  --threads 1 2>"$log" &
pid=$!
# Port 0: the kernel picks a free port; the listening log line says which.
for _ in $(seq 200); do
  grep -q 'msg=listening' "$log" && break
  kill -0 "$pid" 2>/dev/null || break  # it exited: its log says why
  sleep 0.05
done
port=$(sed -nE 's/.*msg=listening.* http=[^ ]*:([0-9]+).*/\1/p' "$log")
[[ -n "$port" ]] || { echo "floodgate did not start:" >&2; cat "$log" >&2; exit 1; }
api="http://127.0.0.1:$port"

show() {  # show METHOD PATH [BODY]: prints the request and the answer
  echo "\$ curl -X $1 $api$2 ${3:+-d '$3'}"
  curl -s -X "$1" "$api$2" ${3:+-H 'Content-Type: application/json' -d "$3"} \
    -w '   <- HTTP %{http_code}\n'
  echo
}

echo "# 1. Issue a code for a phone number (with a delivery URL configured it"
echo "#    would go to the SMS gateway instead of into this answer)."
echo "\$ curl -X POST $api/v1/otp/issue -d '{\"subject\":\"+15550100\"}'"
issued=$(curl -s -X POST "$api/v1/otp/issue" -d '{"subject":"+15550100"}')
echo "$issued"
code=$(echo "$issued" | sed -nE 's/.*"code":"([0-9]+)".*/\1/p')
wrong=$(( (10#$code + 1) % 1000000 )); wrong=$(printf '%06d' "$wrong")
echo
echo "# 2. A wrong code: not valid (and one attempt of the 5 per 15 minutes used)."
show POST /v1/otp/verify "{\"subject\":\"+15550100\",\"code\":\"$wrong\"}"
echo "# 3. The right code: valid, and consumed."
show POST /v1/otp/verify "{\"subject\":\"+15550100\",\"code\":\"$code\"}"
echo "# 4. The same code again (a replay): not valid."
show POST /v1/otp/verify "{\"subject\":\"+15550100\",\"code\":\"$code\"}"
echo "# 5. Issue limit: 3 codes per 5 minutes; the 4th is refused with Retry-After."
for _ in 1 2; do curl -s -o /dev/null -X POST "$api/v1/otp/issue" -d '{"subject":"+15550100"}'; done
curl -s -i -X POST "$api/v1/otp/issue" -d '{"subject":"+15550100"}' | grep -E '^(HTTP|Retry-After)|detail'
echo
echo "# 6. An expiring set: each member has its own TTL (seed 001's sorted-set idea)."
show POST /v1/sets/recent:%2B15550100 '{"member":"req-a","ttl_ms":2000}'
show POST /v1/sets/recent:%2B15550100 '{"member":"req-b","ttl_ms":60000}'
show GET /v1/sets/recent:%2B15550100
echo "#    ... 2 s later req-a is gone by itself:"
sleep 2.1
show GET /v1/sets/recent:%2B15550100
echo "# Counters: curl $api/metrics | grep -E 'otp|set_'"
curl -s "$api/metrics" | grep -E '^floodgate_(otp_issued|otp_verifications|otp_issue_limited|set_operations)'
