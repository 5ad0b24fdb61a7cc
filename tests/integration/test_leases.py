"""Concurrency limits (leases) and waiting instead of rejecting
(docs/leases.md), on the embedded store and shared by two servers on one
real Redis: max_in_flight holds under 64 clients, a holder that dies frees
its lease by the TTL, no key is left without a TTL, a waiting request is
admitted as soon as it can be, max_waiters bounds the waiting room, and a
client that goes away while waiting leaves nothing behind."""
import json
import http.client
import random
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import RespConn, RespError, avoid_window_edge, http_get, metric_value, until

try:
    import redis
except ImportError:  # pragma: no cover - the suite's setup installs python3-redis
    redis = None

RULES = """
rules:
  exports: { algorithm: concurrency, max_in_flight: 3, lease_ttl: 30s, tiers: { pro: 5 },
             on_backend_error: deny }
  short: { algorithm: concurrency, max_in_flight: 3, lease_ttl: 1s, on_backend_error: deny }
  jobs: { algorithm: concurrency, max_in_flight: 1, lease_ttl: 60s, on_backend_error: deny }
  two: { algorithm: fixed_window, limits: [2/second] }
  hourly: { algorithm: fixed_window, limits: [1/hour] }
  crowd: { algorithm: gcra, limits: [1/200s], max_waiters: 1000 }
"""

ACQUISITIONS = 10_000
CLIENTS = 64


def need_redis():
    if redis is None:
        pytest.fail("python3-redis is missing", pytrace=False)


def no_ttl(r):
    return sorted(k for k in r.scan_iter(match="*", count=1000) if r.pttl(k) == -1)


def metrics(server) -> str:
    return http_get(server.http_port, "/metrics").body.decode()


def post(port: int, path: str, body) -> tuple[int, dict | None, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body=json.dumps(body))
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    return r.status, (json.loads(raw) if raw else None), dict(r.getheaders())


def request(port: int, method: str, path: str, body=None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, body=None if body is None else json.dumps(body))
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    return r.status, raw


@pytest.fixture(params=["memory", "redis"])
def servers(request, start_server, redis_server):
    """One server on the embedded store, or two sharing one real Redis."""
    if request.param == "memory":
        return [start_server(RULES, threads=2)], None
    need_redis()
    backend = redis_server()
    # Exactness is the point here, not Redis's latency: a slow round trip
    # (a sanitized build on a busy machine) is waited for, not answered by
    # on_backend_error.
    config = f"store: {backend.url}\nredis: {{ timeout_ms: 2000 }}\n" + RULES
    return [start_server(config, threads=2), start_server(config, threads=2)], backend


def hammer(ports: list[int], key: str, target: int, deadline_s: float) -> dict:
    """CLIENTS threads acquire and release leases of `exports` for `key`
    until `target` acquisitions, holding the test's own count of holders
    (up when a lease is granted, down before it is released, so never above
    what the store holds); the most it ever saw."""
    lock = threading.Lock()
    state = {"holders": 0, "max": 0, "acquired": 0, "refused": 0, "errors": []}
    stop = threading.Event()
    end = time.monotonic() + deadline_s

    def client(i: int) -> None:
        rng = random.Random(i)
        try:
            # Alternate servers; half the clients wait for room, half retry.
            conn = redis.Redis(host="127.0.0.1", port=ports[i % len(ports)], socket_timeout=10)
            other = redis.Redis(host="127.0.0.1", port=ports[(i + 1) % len(ports)],
                                socket_timeout=10)
            wait = ["WAIT", 200] if i % 2 else []
            while not stop.is_set() and time.monotonic() < end:
                acquired, lease, in_flight, limit, _ = conn.execute_command(
                    "FG.ACQUIRE", "exports", key, *wait)
                if not acquired:
                    with lock:
                        state["refused"] += 1
                    continue
                with lock:
                    state["holders"] += 1
                    state["max"] = max(state["max"], state["holders"])
                    state["acquired"] += 1
                    if state["acquired"] >= target:
                        stop.set()
                    assert in_flight <= 3 and limit == 3, (in_flight, limit)
                if rng.random() < 0.3:
                    time.sleep(0.001)
                with lock:
                    state["holders"] -= 1
                # Released through either server: the store knows the lease.
                released = (other if rng.random() < 0.5 else conn).execute_command(
                    "FG.RELEASE", "exports", key, lease)
                assert released == 1, lease
        except Exception as e:  # reported by the test
            state["errors"].append(repr(e))
            stop.set()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(deadline_s + 15)
    return state


def test_max_in_flight_holds_under_64_clients(servers, floodgate_bin):
    need_redis()
    running, backend = servers
    ports = [s.resp_port for s in running]
    state = hammer(ports, "customer:1", ACQUISITIONS, deadline_s=120)
    assert state["errors"] == []
    assert state["acquired"] >= ACQUISITIONS
    assert state["max"] <= 3
    assert state["max"] == 3  # the limit was reached: the test was not too gentle
    assert state["refused"] > 0
    # Every lease was released: the subject holds none, on every server.
    for port in ports:
        with RespConn(port) as c:
            got = c.command("FG.ACQUIRE", "exports", "customer:1")
            assert got[0] == 1 and got[2] == 1, got
            assert c.command("FG.RELEASE", "exports", "customer:1", got[1]) == 1
    if backend is not None:
        r = backend.client()
        assert no_ttl(r) == []
        out = subprocess.run([str(floodgate_bin), "audit", "--redis", backend.url],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "0 without a TTL" in out.stderr


HOLDER = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def command(*args):
    s.sendall(("*%d\\r\\n" % len(args)).encode() + b"".join(
        b"$%d\\r\\n%s\\r\\n" % (len(a), a) for a in (str(x).encode() for x in args)))
    data = b""
    while not data.endswith(b"\\r\\n") or (data.startswith(b"*") and data.count(b"\\r\\n") < 7):
        data += s.recv(4096)  # an integer, or an array of 5 (the lease a bulk: 2 lines)
    return data.split(b"\\r\\n")
leases = []
while len(leases) < 2:
    reply = command("FG.ACQUIRE", "short", "job", "TTL", TTL_MS, "WAIT", 5000)
    if reply[1] == b":1":
        leases.append(reply[3].decode())
    if len(leases) == 2:
        # Both live a whole TTL from `renewing`, however long the second took
        # (one that expired meanwhile is taken again); they are gone by a TTL
        # after `renewed`. CLOCK_MONOTONIC: the test's clock too.
        renewing = time.monotonic()
        leases = [l for l in leases
                  if command("FG.RENEW", "short", "job", l, "TTL", TTL_MS)[0] == b":1"]
        renewed = time.monotonic()
print("held", renewing, renewed, flush=True)
time.sleep(60)
"""


def test_killing_holders_mid_run_frees_their_leases_by_the_ttl(servers, floodgate_bin):
    """Live clients share `short` (3 at once) with a process that takes two
    leases (5 s each) and is killed holding them: the live ones get one slot
    until the dead leases' TTL ends, then all three again. The windows are
    measured from the holder's own renewal, so a slow machine cannot move a
    sample into the wrong one."""
    running, backend = servers
    ports = [s.resp_port for s in running]
    lock = threading.Lock()
    live = {"holders": 0}
    samples: list[tuple[float, int]] = []  # (time, live holders right after a grant)
    errors: list[str] = []
    stop = threading.Event()

    def client(i: int) -> None:
        try:
            with RespConn(ports[i % len(ports)], timeout=10) as c:
                while not stop.is_set():
                    # Released by hand: a TTL long past any stall of this
                    # thread, so only the dead holder's leases expire.
                    got = c.command("FG.ACQUIRE", "short", "job", "TTL", 30000, "WAIT", 2000)
                    if isinstance(got, RespError):
                        errors.append(str(got))
                        return
                    if got[0] != 1:
                        continue
                    with lock:
                        live["holders"] += 1
                        samples.append((time.monotonic(), live["holders"]))
                    time.sleep(0.005)
                    with lock:
                        live["holders"] -= 1
                    assert c.command("FG.RELEASE", "short", "job", got[1]) == 1
        except Exception as e:  # reported by the test
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    ttl_s = 5.0
    spawned_at = time.monotonic()
    holder = subprocess.Popen(
        ["python3", "-c", f"TTL_MS = {int(ttl_s * 1000)}\n" + HOLDER, str(ports[0])],
        stdout=subprocess.PIPE, text=True)
    try:
        said = holder.stdout.readline().split()
        assert said[0] == "held", said
        renewing, renewed = float(said[1]), float(said[2])
        holder.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        holder.wait(5)
    finally:
        if holder.poll() is None:
            holder.kill()
    time.sleep(max(0.0, renewed + ttl_s + 1.5 - time.monotonic()))
    stop.set()
    for t in threads:
        t.join(10)
    assert errors == []
    assert renewing + ttl_s - killed_at > 1.0, "the holder was killed too late to test"
    before = [n for t, n in samples if t < spawned_at]
    dead = [n for t, n in samples if killed_at <= t < renewing + ttl_s - 0.1]
    after = [n for t, n in samples if renewed + ttl_s + 0.2 <= t]
    assert before and max(before) == 3  # three at once before the holder came
    assert dead and max(dead) == 1, dead  # the dead holder's two leases still count
    assert after and max(after) == 3, after  # and are gone by their TTL
    # The ledger of the server that granted them counts them as expired.
    text = metrics(running[0])
    assert metric_value(text, "floodgate_lease_expirations_total", {"rule": "short"}) >= 2
    if backend is not None:
        r = backend.client()
        # Every lease expired or released: the key is gone.
        until(lambda: [k for k in r.scan_iter(match="fg:lease:*")] == [], 10, "no lease keys")
        assert no_ttl(r) == []


def test_a_refused_acquire_names_the_first_expiry(servers):
    running, _ = servers
    with RespConn(running[0].resp_port) as c:
        assert c.command("FG.ACQUIRE", "short", "default")[4] == 1000  # the rule's lease_ttl
        # A minute each, so that none expires before the refusal below
        # however slow the machine.
        leases = [c.command("FG.ACQUIRE", "short", "full", "TTL", 60000) for _ in range(3)]
        assert [l[0] for l in leases] == [1, 1, 1]
        assert all(l[4] == 60000 for l in leases)
    with RespConn(running[-1].resp_port) as c:
        refused = c.command("FG.ACQUIRE", "short", "full")
        assert refused[0] == 0 and refused[1] in (b"", "") and refused[2] == 3
        assert 0 < refused[4] <= 60000  # the retry hint: the first expiry
        assert refused[4] > 50000


def test_lease_ids_are_checked(servers):
    running, _ = servers
    port = running[0].resp_port
    with RespConn(port) as c:
        a = c.command("FG.ACQUIRE", "exports", "alice", "TTL", 5000)
        assert a[0] == 1 and a[4] == 5000
        lease = a[1].decode() if isinstance(a[1], bytes) else a[1]
        assert len(lease) == 32 and int(lease, 16) >= 0  # 128 random bits
        # Someone else's subject, a made-up id, the wrong rule: 0, nothing changes.
        assert c.command("FG.RELEASE", "exports", "bob", lease) == 0
        assert c.command("FG.RELEASE", "exports", "alice", "0" * 32) == 0
        assert c.command("FG.RENEW", "exports", "alice", "f" * 32) == 0
        assert c.command("FG.RENEW", "exports", "alice", lease, "TTL", 9000) == 1
        assert c.command("FG.RELEASE", "exports", "alice", lease) == 1
        assert c.command("FG.RELEASE", "exports", "alice", lease) == 0  # already released
        # An expired lease is not renewed.
        b = c.command("FG.ACQUIRE", "exports", "alice", "TTL", 50)
        time.sleep(0.1)
        assert c.command("FG.RENEW", "exports", "alice", b[1]) == 0
        assert c.command("FG.RELEASE", "exports", "alice", b[1]) == 0
        # The tier's max_in_flight.
        pro = [c.command("FG.ACQUIRE", "exports", "carol", "TIER", "pro") for _ in range(6)]
        assert [p[0] for p in pro] == [1, 1, 1, 1, 1, 0]
        assert pro[5][3] == 5
        # Clear errors.
        for bad, words in [
            (("FG.ACQUIRE", "two", "k"), "is not a concurrency rule"),
            (("FG.CHECK", "exports", "k"), "is a concurrency rule"),
            (("FG.ACQUIRE", "nope", "k"), "unknown rule"),
            (("FG.ACQUIRE", "exports", "k", "TTL", 0), "TTL must be"),
            (("FG.ACQUIRE", "exports", "k", "WAIT", -1), "WAIT must be"),
            (("FG.ACQUIRE", "exports", "k", "SOON"), "syntax error"),
            (("FG.ACQUIRE", "exports", "k", "TIER", "gold"), "has no tier"),
            (("FG.RENEW", "exports", "k", "x", "TTL"), "needs a value"),
            (("FG.ACQUIRE", "exports", "k" * 600), "key"),
        ]:
            reply = c.command(*bad)
            assert isinstance(reply, RespError) and words in str(reply), (bad, reply)


def test_leases_over_http(servers):
    running, _ = servers
    port = running[0].http_port
    status, body, _ = post(port, "/v1/leases", {"rule": "exports", "key": "h", "ttl_ms": 4000})
    assert status == 200, body
    assert body["in_flight"] == 1 and body["limit"] == 3 and body["expires_in_ms"] == 4000
    lease = body["lease"]
    assert request(port, "PUT", f"/v1/leases/exports/h/{lease}", {"ttl_ms": 8000})[0] == 200
    for _ in range(2):
        assert post(port, "/v1/leases", {"rule": "exports", "key": "h"})[0] == 200
    status, body, headers = post(port, "/v1/leases", {"rule": "exports", "key": "h"})
    assert status == 429 and body["acquired"] is False and body["in_flight"] == 3
    assert int(headers["Retry-After"]) >= 1
    assert request(port, "DELETE", f"/v1/leases/exports/h/{lease}")[0] == 204
    assert request(port, "DELETE", f"/v1/leases/exports/h/{lease}")[0] == 404
    assert request(port, "PUT", f"/v1/leases/exports/h/{lease}")[0] == 404
    status, body, _ = post(port, "/v1/leases", {"rule": "exports", "key": "h", "wait_ms": 10})
    assert status == 200, body
    for bad in [{"rule": "exports"}, {"rule": "exports", "key": "h", "ttl_ms": 0},
                {"rule": "exports", "key": "h", "wait_ms": 10**9},
                {"rule": "exports", "key": "h", "extra": 1}]:
        assert post(port, "/v1/leases", bad)[0] == 400, bad
    assert post(port, "/v1/leases", {"rule": "two", "key": "h"})[0] == 400
    assert post(port, "/v1/leases", {"rule": "nope", "key": "h"})[0] == 404
    assert request(port, "DELETE", "/v1/leases/exports/h")[0] == 404
    assert request(port, "GET", f"/v1/leases/exports/h/{lease}")[0] == 405


def wall_ms() -> float:
    return time.time() * 1000


def test_a_waiting_check_is_admitted_as_soon_as_it_can_be(servers):
    """2/second, fixed windows on the second: a third request waits for the
    next second and is admitted within 10 ms of it."""
    running, _ = servers
    port = running[-1].resp_port
    lateness = []
    with RespConn(port) as c:
        for trial in range(5):
            # Start early in a second, so that the wait is most of one.
            while wall_ms() % 1000 > 100:
                time.sleep(0.01)
            key = f"w{trial}"
            assert c.command("FG.CHECK", "two", key)[0] == 1
            assert c.command("FG.CHECK", "two", key)[0] == 1
            got = c.command("FG.CHECK", "two", key, "WAIT", 2000)
            answered = wall_ms()
            assert got[0] == 1, got
            boundary = (answered // 1000) * 1000  # the second it was admitted in
            lateness.append(answered - boundary)
    lateness.sort()
    assert lateness[len(lateness) // 2] <= 10, lateness
    assert lateness[-1] <= 50, lateness


def test_a_wait_too_short_is_answered_at_once_and_http_waits_too(servers):
    running, _ = servers
    # The hour's window must not end within the wait (it would then be held,
    # and admitted at the next hour).
    avoid_window_edge(3600, margin_s=60)
    with RespConn(running[0].resp_port) as c:
        assert c.command("FG.CHECK", "hourly", "z")[0] == 1
        start = time.monotonic()
        got = c.command("FG.CHECK", "hourly", "z", "WAIT", 20000)
        assert got[0] == 0 and got[3] > 20000
        # It could not succeed in time: answered at once, not held for 20 s.
        assert time.monotonic() - start < 5
    port = running[0].http_port
    while wall_ms() % 1000 > 300:
        time.sleep(0.01)
    for _ in range(2):
        assert request(port, "GET", "/v1/check?rule=two&key=hw")[0] == 200
    status, _ = request(port, "GET", "/v1/check?rule=two&key=hw&wait_ms=1500")
    assert status == 200
    # The waited one took one of the new second's two: wait_ms 0 waits for nothing.
    statuses = [request(port, "POST", "/v1/check", {"rule": "two", "key": "hw", "wait_ms": 0})[0]
                for _ in range(2)]
    assert statuses[-1] == 429, statuses
    assert request(port, "GET", "/v1/check?rule=two&key=hw&wait_ms=x")[0] == 400


def acquire_waiting(port: int, key: str, wait_ms: int, release=None) -> tuple[list, float]:
    """FG.ACQUIRE jobs `key` WAIT `wait_ms`, with `release(started)` run on
    a thread of its own meanwhile; the reply, and how long it took in ms."""
    with RespConn(port, timeout=10) as c:
        started = time.monotonic()
        helper = None
        if release is not None:
            helper = threading.Thread(target=release, args=(started,))
            helper.start()
        got = c.command("FG.ACQUIRE", "jobs", key, "WAIT", wait_ms)
        took_ms = (time.monotonic() - started) * 1000
        if helper is not None:
            helper.join(10)
    return got, took_ms


def test_a_lease_wait_is_held_to_its_deadline(servers):
    """A waiting acquire is held until its deadline, not a poll interval
    less: with no release it is refused at the deadline; a release 50 ms
    before it, through this server or (on Redis) through another, admits
    it. Over RESP and HTTP. Bounds are loose above (a loaded machine
    answers late), tight below (a refusal before the deadline is the bug)."""
    running, _ = servers
    port = running[0].resp_port
    holder = RespConn(port, timeout=10)
    try:
        for wait_ms in (500, 1000):
            key = f"deadline:{wait_ms}"
            assert holder.command("FG.ACQUIRE", "jobs", key)[0] == 1
            got, took_ms = acquire_waiting(port, key, wait_ms)
            assert got[0] == 0 and got[2] == 1 and got[4] > 50000, got
            assert wait_ms - 5 <= took_ms <= wait_ms + 400, (wait_ms, took_ms)

        # A release just before the deadline, through each server.
        for n, releaser in enumerate(running):
            key = f"freed:{n}"
            lease = holder.command("FG.ACQUIRE", "jobs", key)
            assert lease[0] == 1
            released_at = []

            def release(started, releaser=releaser, key=key, lease=lease[1]):
                time.sleep(max(0.0, started + 0.950 - time.monotonic()))
                with RespConn(releaser.resp_port, timeout=10) as r:
                    released_at.append((time.monotonic() - started) * 1000)
                    assert r.command("FG.RELEASE", "jobs", key, lease) == 1

            got, took_ms = acquire_waiting(port, key, 1000, release)
            assert got[0] == 1 and got[2] == 1, (n, got, took_ms, released_at)
            assert released_at and released_at[0] <= took_ms <= 1400, (took_ms, released_at)
            assert holder.command("FG.RELEASE", "jobs", key, got[1]) == 1

        # HTTP's wait_ms: refused at its deadline too.
        assert holder.command("FG.ACQUIRE", "jobs", "deadline:http")[0] == 1
        started = time.monotonic()
        status, body, _ = post(running[0].http_port, "/v1/leases",
                               {"rule": "jobs", "key": "deadline:http", "wait_ms": 800})
        took_ms = (time.monotonic() - started) * 1000
        assert status == 429 and body["in_flight"] == 1, body
        assert 795 <= took_ms <= 1200, took_ms
    finally:
        holder.close()


def test_max_waiters_bounds_the_room_and_a_disconnect_leaks_nothing(servers):
    """2,000 waiters on a rule with max_waiters 1000: 1000 are held, the
    rest answered at once; the held ones' clients go away and the gauges
    are back to zero, with nothing spent for them."""
    running, _ = servers
    server = running[0]
    port = server.resp_port
    with RespConn(port) as c:
        assert c.command("FG.CHECK", "crowd", "crowd")[0] == 1
    # 20 connections x 50 pipelined waits (each long enough to hold).
    held = []
    for _ in range(20):
        conn = RespConn(port, timeout=10)
        conn.send(b"".join(RespConn.encode("FG.CHECK", "crowd", "crowd", "WAIT", 300000)
                           for _ in range(50)))
        held.append(conn)
    until(lambda: metric_value(metrics(server), "floodgate_waiting", {"rule": "crowd"}) == 1000,
          what="1000 requests held")
    # 1000 more: no room, answered at once (denied).
    start = time.monotonic()
    others = []
    for _ in range(10):
        conn = RespConn(port, timeout=10)
        conn.send(b"".join(RespConn.encode("FG.CHECK", "crowd", "crowd", "WAIT", 300000)
                           for _ in range(100)))
        others.append(conn)
    for conn in others:
        for _ in range(100):
            got = conn.read_reply()
            assert got[0] == 0 and got[3] > 0, got
        conn.close()
    assert time.monotonic() - start < 5
    text = metrics(server)
    assert metric_value(text, "floodgate_waits_total", {"rule": "crowd", "outcome": "full"}) == 1000
    # The held clients go away.
    for conn in held:
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    until(lambda: metric_value(metrics(server), "floodgate_waiting", {"rule": "crowd"}) == 0,
          what="the held requests dropped")
    text = metrics(server)
    assert metric_value(text, "floodgate_waiting", {"rule": "crowd"}) == 0
    assert metric_value(text, "floodgate_waits_total",
                        {"rule": "crowd", "outcome": "cancelled"}) == 1000
    assert metric_value(text, "floodgate_waits_total",
                        {"rule": "crowd", "outcome": "admitted"}) == 0
    # A lease waiter that goes away leaves no lease behind either.
    with RespConn(port) as c:
        taken = [c.command("FG.ACQUIRE", "exports", "gone") for _ in range(3)]
        assert [t[0] for t in taken] == [1, 1, 1]
        def exports(name: str, labels: dict) -> float:
            return metric_value(metrics(server), name, {"rule": "exports", **labels}) or 0

        cancelled = exports("floodgate_waits_total", {"outcome": "cancelled"})
        w = RespConn(port)
        w.send(RespConn.encode("FG.ACQUIRE", "exports", "gone", "WAIT", 300000))
        until(lambda: exports("floodgate_waiting", {}) == 1, what="the lease waiter held")
        w.sock.shutdown(socket.SHUT_RDWR)
        w.close()
        # Its going away is seen before any slot is freed.
        until(lambda: exports("floodgate_waits_total", {"outcome": "cancelled"}) == cancelled + 1,
              what="the lease waiter cancelled")
        assert exports("floodgate_waiting", {}) == 0
        for t in taken:
            assert c.command("FG.RELEASE", "exports", "gone", t[1]) == 1
        time.sleep(0.3)
        # Nobody took the freed slots: three are there for the next client.
        again = [c.command("FG.ACQUIRE", "exports", "gone") for _ in range(3)]
        assert [a[0] for a in again] == [1, 1, 1], again
        assert again[-1][2] == 3


def test_overrides_and_blocks_apply_to_leases(start_server):
    """The control plane on a concurrency rule: an override is the
    subject's max_in_flight, a block refuses with its time left."""
    server = start_server(RULES)
    with RespConn(server.resp_port) as c:
        assert not isinstance(c.command("FG.OVERRIDE", "SET", "exports", "vip", 0, 5), RespError)
        got = c.command("FG.OVERRIDE", "GET", "exports", "vip")
        assert not isinstance(got, RespError), got
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:  # applied on the control plane's thread
            first = c.command("FG.ACQUIRE", "exports", "vip")
            if first[3] == 5:
                break
            c.command("FG.RELEASE", "exports", "vip", first[1])
            time.sleep(0.05)
        assert first[0] == 1 and first[3] == 5
        more = [c.command("FG.ACQUIRE", "exports", "vip") for _ in range(5)]
        assert [m[0] for m in more] == [1, 1, 1, 1, 0]
        bad = c.command("FG.OVERRIDE", "SET", "exports", "vip", 0, "5/s")
        assert isinstance(bad, RespError) and "max_in_flight" in str(bad), bad
        assert not isinstance(c.command("FG.BLOCK", "mallory", 60000, "RULE", "exports",
                                        "REASON", "abuse"), RespError)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            refused = c.command("FG.ACQUIRE", "exports", "mallory")
            if refused[0] == 0:
                break
            c.command("FG.RELEASE", "exports", "mallory", refused[1])
            time.sleep(0.05)
        assert refused[0] == 0 and 59000 < refused[4] <= 60000, refused
    status, body, _ = post(server.http_port, "/v1/leases", {"rule": "exports", "key": "mallory"})
    assert status == 429 and body["blocked"] is True and body["reason"] == "abuse", body


def test_requests_held_waiting_are_answered_when_the_server_stops(start_server):
    """SIGTERM while a lease, a RESP check and an HTTP check are held, each
    able to wait far longer than the drain: each gets its answer (denied,
    with when to come back) before the drain closes its connection, and the
    server exits 0."""
    server = start_server("server: { drain_timeout: 2s }\n" + RULES)
    port = server.resp_port
    with RespConn(port) as c:
        assert [c.command("FG.ACQUIRE", "exports", "busy")[0] for _ in range(3)] == [1, 1, 1]
        assert c.command("FG.CHECK", "crowd", "stop")[0] == 1  # the next in 200 s
    lease_waiter = RespConn(port, timeout=10)
    lease_waiter.send(RespConn.encode("FG.ACQUIRE", "exports", "busy", "WAIT", 60000))
    check_waiter = RespConn(port, timeout=10)
    check_waiter.send(RespConn.encode("FG.CHECK", "crowd", "stop", "WAIT", 300000))
    http_answer = {}

    def http_waiter():
        try:
            http_answer["status"], http_answer["body"] = request(
                server.http_port, "GET", "/v1/check?rule=crowd&key=stop&wait_ms=300000")
        except Exception as e:  # reported by the test
            http_answer["error"] = repr(e)

    t = threading.Thread(target=http_waiter)
    t.start()
    def held():
        text = metrics(server)
        return [metric_value(text, "floodgate_waiting", {"rule": r}) for r in ("exports", "crowd")]

    until(lambda: held() == [1, 2], what="a lease and two checks held")
    server.send_signal(signal.SIGTERM)
    try:
        lease = lease_waiter.read_reply()
        assert lease[0] == 0 and lease[2] == 3 and lease[4] > 0, lease
        check = check_waiter.read_reply()
        assert check[0] == 0 and check[3] > 0, check
        t.join(10)
        assert "error" not in http_answer, http_answer
        assert http_answer["status"] == 429, http_answer
    finally:
        lease_waiter.close()
        check_waiter.close()
    assert server.stop() == 0
