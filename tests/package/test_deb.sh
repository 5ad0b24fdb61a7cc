#!/usr/bin/env bash
# The Debian package, end to end on this machine: builds it (the `package`
# target of the build directory given), installs it with dpkg -i, checks
# its files, user, conffiles and dependencies, runs the unit's ExecStart
# command line as the packaged user (with the unit's no-new-privileges and
# empty capability set), asks it one question over HTTP, stops it with
# SIGTERM, then purges the package and checks nothing is left.
#
#   tests/package/test_deb.sh build/release
#
# Needs root (or password-less sudo). Refuses to run where a floodgate
# package, user or directory already exists: it never purges what it did
# not install.
set -euo pipefail

bindir=$(cd "${1:?usage: test_deb.sh <build dir>}" && pwd)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "--- $*" >&2; }
# Any other command that fails (set -e) says where.
trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  fail "needs root or password-less sudo (it installs and purges the floodgate package)"
fi

for tool in dpkg dpkg-deb dpkg-query dpkg-shlibdeps setpriv systemd-analyze curl python3 objdump; do
  command -v "$tool" >/dev/null || fail "'$tool' is missing: run scripts/setup.sh"
done

package_state() { dpkg-query -W -f='${db:Status-Status}' floodgate 2>/dev/null || true; }

state=$(package_state)
if [[ -n $state && $state != not-installed ]]; then
  fail "a floodgate package is already on this machine (state: $state); this test installs" \
    "and purges its own, so it will not touch that one. Remove it first (dpkg --purge floodgate)."
fi
getent passwd floodgate >/dev/null && fail "a floodgate user already exists; not touching it"
getent group floodgate >/dev/null && fail "a floodgate group already exists; not touching it"
for path in /etc/floodgate /var/lib/floodgate /usr/bin/floodgate /etc/default/floodgate; do
  [[ -e $path ]] && fail "$path already exists; not touching it"
done

work=$(mktemp -d)
installed=0
server_pid=
cleanup() {
  local rc=$?
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  if ((installed)); then
    echo "--- cleanup: purging the package this test installed" >&2
    "${SUDO[@]}" dpkg --purge floodgate >&2 || true
  fi
  if ((rc != 0)) && [[ -s $work/server.log ]]; then
    echo "--- server log" >&2
    cat "$work/server.log" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

step "building the package"
cmake --build "$bindir" --target package >"$work/build.log" 2>&1 || {
  cat "$work/build.log" >&2
  fail "cmake --build $bindir --target package failed"
}

# The package is named after the version the binary reports.
built_version=$("$bindir/floodgate" --version)
[[ $built_version =~ ^floodgate\ ([0-9]+\.[0-9]+\.[0-9]+)\ \(([0-9a-f]+|unknown)\)$ ]] ||
  fail "unexpected --version: $built_version"
version=${BASH_REMATCH[1]}
arch=$(dpkg --print-architecture)
deb=$bindir/floodgate_${version}_${arch}.deb
[[ -f $deb ]] || fail "no $deb after building the package target"
[[ $deb -nt $bindir/floodgate ]] || fail "$deb is older than the binary"

step "contents of $(basename "$deb")"
[[ $(dpkg-deb -f "$deb" Package) == floodgate ]] || fail "package name"
[[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "package version"
[[ $(dpkg-deb -f "$deb" Section) == net ]] || fail "section"
[[ $(dpkg-deb -f "$deb" Maintainer) == "floodgate maintainers" ]] || fail "maintainer"
# Files only (not directories), as ./path.
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }' | sort >"$work/files"
printf '%s\n' ./etc/default/floodgate ./etc/floodgate/floodgate.yaml \
  ./lib/systemd/system/floodgate.service ./lib/systemd/system/floodgate@.service \
  ./usr/lib/sysctl.d/60-floodgate.conf ./usr/bin/floodgate | sort >"$work/expected"
diff -u "$work/expected" "$work/files" >&2 ||
  fail "the package holds other files than the server's (headers, the library?)"
dpkg-deb -e "$deb" "$work/control"
for script in postinst prerm postrm; do
  [[ -x $work/control/$script ]] || fail "maintainer script $script missing or not executable"
  sh -n "$work/control/$script" || fail "$script: syntax"
done

step "dpkg -i"
installed=1
"${SUDO[@]}" dpkg -i "$deb" >&2
[[ $(package_state) == installed ]] || fail "dpkg says $(package_state), not installed"

step "files, conffiles, user, state directory"
for path in /usr/bin/floodgate /lib/systemd/system/floodgate.service \
  /lib/systemd/system/floodgate@.service /usr/lib/sysctl.d/60-floodgate.conf \
  /etc/floodgate/floodgate.yaml /etc/default/floodgate; do
  [[ -f $path ]] || fail "$path missing after install"
done
[[ -x /usr/bin/floodgate ]] || fail "/usr/bin/floodgate not executable"
conffiles=$(dpkg-query -W -f='${Conffiles}\n' floodgate)
for f in /etc/floodgate/floodgate.yaml /etc/default/floodgate; do
  grep -q "^ $f " <<<"$conffiles" || fail "$f is not a conffile: $conffiles"
done
[[ $(stat -c '%U:%G %a' /etc/default/floodgate) == "root:root 600" ]] ||
  fail "/etc/default/floodgate is $(stat -c '%U:%G %a' /etc/default/floodgate), not root:root 600"

IFS=: read -r _ _ uid gid _ home shell < <(getent passwd floodgate) || fail "no floodgate user"
sys_uid_max=$(awk '$1 == "SYS_UID_MAX" { print $2 }' /etc/login.defs 2>/dev/null)
((uid < ${sys_uid_max:-999} + 1)) || fail "floodgate (uid $uid) is not a system user"
[[ $shell == /usr/sbin/nologin ]] || fail "floodgate's shell is $shell"
[[ $home == /var/lib/floodgate ]] || fail "floodgate's home is $home"
[[ $(getent group floodgate | cut -d: -f3) == "$gid" ]] || fail "floodgate's group is not floodgate"
[[ $(stat -c '%U:%G %a' /var/lib/floodgate) == "floodgate:floodgate 750" ]] ||
  fail "/var/lib/floodgate is $(stat -c '%U:%G %a' /var/lib/floodgate)"

installed_version=$(/usr/bin/floodgate --version)
[[ $installed_version == "$built_version" ]] ||
  fail "/usr/bin/floodgate --version says '$installed_version', the build '$built_version'"
/usr/bin/floodgate check-config /etc/floodgate/floodgate.yaml >"$work/check.log" ||
  fail "the packaged config does not pass check-config: $(cat "$work/check.log")"
grep -q '^data_dir: /var/lib/floodgate$' /etc/floodgate/floodgate.yaml ||
  fail "the packaged config does not set data_dir: /var/lib/floodgate"

step "dependencies from dpkg-shlibdeps"
depends=$(dpkg-query -W -f='${Depends}' floodgate)
echo "Depends: $depends" >&2
grep -qw adduser <<<"$depends" || fail "Depends lacks adduser"
# Every library the binary links must come from a package Depends names.
depends_names=$(sed 's/ *([^)]*)//g; s/ *| */\n/g; s/, */\n/g' <<<"$depends")
needed=$(objdump -p /usr/bin/floodgate | awk '$1 == "NEEDED" { print $2 }')
[[ -n $needed ]] || fail "no NEEDED libraries in /usr/bin/floodgate?"
/sbin/ldconfig -p >"$work/ldconfig"
for lib in $needed; do
  path=$(awk -v l="$lib" '$1 == l && !found { print $NF; found = 1 }' "$work/ldconfig")
  [[ -n $path ]] || fail "$lib not found by ldconfig"
  # dpkg knows the path it unpacked: ldconfig's, or the file it links to
  # (with or without the merged /usr).
  real=$(readlink -f "$path")
  owner=
  for candidate in "$path" "$real" "${real#/usr}"; do
    owner=$(dpkg -S "$candidate" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1) || true
    [[ -n $owner ]] && break
  done
  [[ -n $owner ]] || fail "no package owns $path ($lib)"
  grep -qxF "$owner" <<<"$depends_names" ||
    fail "$lib comes from $owner, which Depends does not name"
done

step "the unit"
unit=/lib/systemd/system/floodgate.service
for line in Type=exec User=floodgate Group=floodgate StateDirectory=floodgate \
  StateDirectoryMode=0750 EnvironmentFile=-/etc/default/floodgate NoNewPrivileges=yes \
  PrivateTmp=yes ProtectSystem=strict ProtectHome=yes PrivateDevices=yes \
  ProtectKernelTunables=yes ProtectKernelModules=yes ProtectControlGroups=yes \
  'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' RestrictNamespaces=yes \
  LockPersonality=yes MemoryDenyWriteExecute=yes SystemCallArchitectures=native \
  CapabilityBoundingSet= LimitNOFILE=65536 Restart=on-failure WantedBy=multi-user.target; do
  grep -qxF "$line" "$unit" || fail "the unit lacks '$line'"
done
# Longer than the server's drain (server.drain_timeout, 5 s by default).
stop_timeout=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$unit")
[[ -n $stop_timeout ]] && ((stop_timeout > 5)) || fail "TimeoutStopSec must exceed the 5 s drain"
systemd-analyze verify "$unit" >"$work/verify.log" 2>&1 ||
  fail "systemd-analyze verify: $(cat "$work/verify.log")"
# Clean: no warnings either (the executables it names exist now).
[[ ! -s $work/verify.log ]] || fail "systemd-analyze verify: $(cat "$work/verify.log")"

step "the unit's command line as the floodgate user"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[[ $(grep -c '^ExecStart=' "$unit") == 1 && -n $exec_start ]] || fail "one ExecStart= expected"
read -r -a command <<<"$exec_start"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The environment systemd would give it: the EnvironmentFile's assignments.
env_vars=()
while IFS= read -r line; do
  if [[ $line =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then env_vars+=("$line"); fi
done </etc/default/floodgate
# The unit's user and group, no new privileges, no capabilities
# (CapabilityBoundingSet= empty), working directory /, as systemd does.
(cd / && exec "${SUDO[@]}" setpriv --reuid=floodgate --regid=floodgate --init-groups \
  --no-new-privs --inh-caps=-all --bounding-set=-all -- \
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${env_vars[@]}" \
  "${command[@]}" --http "127.0.0.1:$port" --resp off --grpc off) >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || fail "the server exited at start"
  sleep 0.1
done
curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || fail "the server did not come up in 10 s"
pid=$(pgrep -u floodgate -x floodgate | head -1) || true
[[ -n $pid ]] || fail "no floodgate process of the floodgate user"
grep -q NoNewPrivs:.*1 "/proc/$pid/status" || fail "the server runs without no_new_privs"
grep -Eq '^CapBnd:\s+0+$' "/proc/$pid/status" || fail "the server keeps capabilities"

status=$(curl -s -o "$work/check.json" -w '%{http_code}' -X POST "http://127.0.0.1:$port/v1/check" \
  -d '{"rule":"api","key":"deb:test"}')
[[ $status == 200 ]] || fail "POST /v1/check answered $status: $(cat "$work/check.json")"
python3 - "$work/check.json" <<'EOF' || fail "unexpected /v1/check answer: $(cat "$work/check.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["allowed"] is True and r["rule"] == "api" and r["key"] == "deb:test", r
assert r["limit"] == 60 and r["remaining"] == 59, r
EOF

# data_dir: a control-plane record is written to /var/lib/floodgate by the
# floodgate user (the admin API answers loopback clients without a token).
status=$(curl -s -o "$work/block.json" -w '%{http_code}' -X PUT \
  "http://127.0.0.1:$port/v1/admin/blocks/deb-blocked" -d '{"ttl_ms":60000,"reason":"package test"}')
[[ $status == 200 ]] || fail "PUT /v1/admin/blocks answered $status: $(cat "$work/block.json")"
[[ -f /var/lib/floodgate/control.db ]] || fail "nothing written to /var/lib/floodgate"
[[ $(stat -c %U /var/lib/floodgate/control.db) == floodgate ]] ||
  fail "control.db is not the floodgate user's"
grep -q deb-blocked /var/lib/floodgate/control.db || fail "control.db lacks the block"

step "SIGTERM"
"${SUDO[@]}" kill -TERM "$pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=
((rc == 0)) || fail "the server exited $rc on SIGTERM"

step "dpkg --purge"
"${SUDO[@]}" dpkg --purge floodgate >&2
installed=0
state=$(package_state)
[[ -z $state || $state == not-installed ]] || fail "dpkg says $state after purge"
dpkg -s floodgate >/dev/null 2>&1 && fail "dpkg -s still finds floodgate"
for path in /usr/bin/floodgate /lib/systemd/system/floodgate.service /etc/floodgate \
  /etc/default/floodgate /var/lib/floodgate; do
  [[ -e $path ]] && fail "$path left after purge"
done
getent passwd floodgate >/dev/null && fail "the floodgate user is left after purge"
getent group floodgate >/dev/null && fail "the floodgate group is left after purge"
echo "package test passed: $(basename "$deb")" >&2
