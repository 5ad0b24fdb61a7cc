"""floodgate serving from the Redis store: a real redis-server behind it,
real clients (redis-py, curl) in front of it."""

import json
import os
import subprocess
import signal
import threading
import time
import urllib.request

import pytest

from conftest import avoid_window_edge, require_tool

try:
    import redis
except ImportError:  # FAIL, do not skip: the client is part of the contract
    redis = None

# A generous timeout: these tests are about decisions, not latency, and must
# hold in slow (sanitizer) builds. The outage test sets its own.
CONFIG = """\
redis: { timeout_ms: 2000 }
rules:
  api:     { algorithm: fixed_window, limits: [5/hour] }
  tiered:  { algorithm: fixed_window, limits: [2/hour], tiers: { pro: [4/hour] } }
  multi:   { algorithm: sliding_window, limits: [3/minute, 10/hour] }
  bucket:  { algorithm: token_bucket, limits: [4/hour] }
  cell:    { algorithm: gcra, limits: [5/hour] }
  log:     { algorithm: sliding_log, limits: [3/hour] }
  open:    { algorithm: fixed_window, limits: [1/hour], on_backend_error: allow }
  closed:  { algorithm: fixed_window, limits: [1000/hour], on_backend_error: deny }
"""


def client(port):
    if redis is None:
        pytest.fail("the Python 'redis' module is missing: apt-get install -y python3-redis",
                    pytrace=False)
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def keys_without_ttl(r):
    return [k for k in r.scan_iter(match="*", count=1000) if r.pttl(k) < 0]


def metric(server, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/metrics", timeout=5) as f:
        for line in f.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(line.split()[1])
    return None


@pytest.fixture
def backend(redis_server):
    return redis_server()


def test_decisions_are_made_on_redis_with_a_ttl_on_every_key(start_server, backend):
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    replies = [c.execute_command("FG.CHECK", "api", "alice") for _ in range(7)]
    assert [r[0] for r in replies] == [1, 1, 1, 1, 1, 0, 0]
    assert [r[2] for r in replies[:5]] == [4, 3, 2, 1, 0]
    assert replies[5][3] > 0  # retry_after_ms: until the hour's end
    r = backend.client()
    ttl = r.pttl("fg:{api:alice}")
    assert 0 < ttl <= 3_600_000
    # Every algorithm, a tier and a multi-limit rule: state only with expiry.
    for rule in ("multi", "bucket", "cell", "log"):
        assert c.execute_command("FG.CHECK", rule, "bob")[0] == 1
    assert c.execute_command("FG.CHECK", "tiered", "bob", "TIER", "pro")[2] == 3
    assert r.exists("fg:{tiered:bob}:pro") == 1
    assert keys_without_ttl(r) == []
    assert len(list(r.scan_iter(match="fg:*"))) == 6


def test_errors_are_answered_without_touching_redis(start_server, backend):
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    with pytest.raises(redis.ResponseError, match="unknown rule"):
        c.execute_command("FG.CHECK", "nope", "alice")
    with pytest.raises(redis.ResponseError, match="no tier"):
        c.execute_command("FG.CHECK", "tiered", "alice", "TIER", "gold")
    with pytest.raises(redis.ResponseError, match="key is 513 bytes"):
        c.execute_command("FG.CHECK", "api", "k" * 513)
    assert backend.client().dbsize() == 0


def test_a_pipeline_is_answered_in_order(start_server, backend):
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    p = c.pipeline(transaction=False)
    expected = []
    for i in range(60):
        user = f"user{i % 4}"
        p.execute_command("FG.CHECK", "api", user)
        expected.append(("check", user))
        if i % 10 == 0:
            p.execute_command("PING")  # answered at once, between pending ones
            expected.append(("ping", None))
    replies = p.execute(raise_on_error=False)
    seen = {}
    for (kind, user), reply in zip(expected, replies, strict=True):
        if kind == "ping":
            assert reply is True
            continue
        n = seen.get(user, 0)
        seen[user] = n + 1
        # The n-th check of a user: 5 allowed with remaining 4..0, then denied.
        assert reply[0] == (1 if n < 5 else 0)
        if n < 5:
            assert reply[2] == 4 - n


def test_reset_deletes_the_subject_in_redis(start_server, backend):
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    for _ in range(3):
        c.execute_command("FG.CHECK", "tiered", "carol")
        c.execute_command("FG.CHECK", "tiered", "carol", "TIER", "pro")
    r = backend.client()
    assert r.exists("fg:{tiered:carol}", "fg:{tiered:carol}:pro") == 2
    assert c.execute_command("FG.RESET", "tiered", "carol") in (b"OK", "OK", True)
    assert r.exists("fg:{tiered:carol}", "fg:{tiered:carol}:pro") == 0
    assert c.execute_command("FG.CHECK", "tiered", "carol")[0:3] == [1, 2, 1]


def test_http_check_on_redis_with_curl(start_server, backend):
    curl = require_tool("curl", "curl")
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    url = f"http://127.0.0.1:{server.http_port}/v1/check"
    statuses = []
    for _ in range(6):
        out = subprocess.run(
            [curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H",
             "Content-Type: application/json", "-d", '{"rule":"api","key":"dave"}', url],
            capture_output=True, text=True, timeout=10)
        statuses.append(out.stdout)
    assert statuses == ["200"] * 5 + ["429"]
    body = subprocess.run([curl, "-s", url + "?rule=api&key=erin"], capture_output=True,
                          text=True, timeout=10).stdout
    assert json.loads(body)["remaining"] == 4
    assert backend.client().pttl("fg:{api:erin}") > 0


def test_cl_throttle_on_redis(start_server, backend):
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    # redis-cell: max_burst 2 -> 3 immediately, the 4th limited.
    replies = [c.execute_command("CL.THROTTLE", "frank", 2, 10, 60) for _ in range(4)]
    assert [r[0] for r in replies] == [0, 0, 0, 1]
    assert replies[0][1] == 3
    assert backend.client().pttl("fg:cl:{frank}") > 0


def test_two_servers_on_one_redis_admit_exactly_the_limit_window_after_window(
        start_server, backend):
    """64 concurrent clients over two floodgate processes: in each full
    window exactly `limit` requests are admitted, never one more."""
    # Exactness is Redis's answer: a late one must not be counted as an
    # admission (on_backend_error: deny, a timeout no slow build reaches).
    config = ("redis: { timeout_ms: 5000 }\n"
              "rules:\n  shared: { algorithm: fixed_window, limits: [40/2s], "
              "on_backend_error: deny }\n")
    servers = [start_server(config, extra_args=["--store", backend.url]) for _ in range(2)]
    avoid_window_edge(2.0, margin_s=1.9)
    stop_at = time.time() + 7.0
    admitted = []  # window end (ms) of each admitted request
    lock = threading.Lock()
    errors = []

    def worker(port):
        try:
            c = client(port)
            while time.time() < stop_at:
                before = time.time()
                allowed, _, _, _, reset_after_ms = c.execute_command("FG.CHECK", "shared", "k")
                if allowed:
                    # The window's end, to the nearest 2 s boundary.
                    end = round((before * 1000 + reset_after_ms) / 2000) * 2000
                    with lock:
                        admitted.append(end)
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(servers[i % 2].resp_port,))
               for i in range(64)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    per_window = {}
    for end in admitted:
        per_window[end] = per_window.get(end, 0) + 1
    # Windows wholly inside the run.
    full = [end for end in per_window if end - 2000 >= start * 1000 and end <= stop_at * 1000]
    assert len(full) >= 2, per_window
    for end in full:
        assert per_window[end] == 40, per_window
    assert max(per_window.values()) == 40
    assert all(metric(s, "floodgate_backend_errors_total") == 0 for s in servers)
    assert keys_without_ttl(backend.client()) == []


def test_redis_down_answers_by_on_backend_error_within_the_timeout(start_server, backend):
    config = CONFIG.replace("timeout_ms: 2000", "timeout_ms: 20")  # the default
    server = start_server(config, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    assert c.execute_command("FG.CHECK", "open", "gina")[0] == 1
    backend.stop()
    worst = 0.0
    answered = 0
    t_down = time.monotonic()
    # Long enough for reconnect attempts to fail often enough to open the circuit.
    while time.monotonic() - t_down < 1.0:
        for rule, expected in (("open", 1), ("closed", 0)):
            answered += 1
            t0 = time.monotonic()
            reply = c.execute_command("FG.CHECK", rule, "gina")
            worst = max(worst, time.monotonic() - t0)
            assert reply[0] == expected, (rule, reply)
    # 20 ms timeout: generous slack for a loaded 2-core machine, far below
    # what waiting on a dead backend would cost.
    assert worst < 0.5, worst
    # HTTP says the answer came from on_backend_error.
    with urllib.request.urlopen(
            f"http://127.0.0.1:{server.http_port}/v1/check?rule=open&key=gina", timeout=5) as f:
        body = json.loads(f.read())
    assert body["allowed"] is True and body["fallback"] == "backend_error"
    assert body["remaining"] is None and body["reset_after_ms"] is None
    assert metric(server, "floodgate_backend_errors_total") >= answered
    assert metric(server, "floodgate_backend_open_circuits") >= 1

    backend.start()  # same port
    t_back = time.monotonic()
    while time.monotonic() - t_back < 3.0:
        reply = c.execute_command("FG.CHECK", "closed", "gina")
        if reply[0] == 1:
            break
        time.sleep(0.02)
    assert reply[0] == 1
    assert time.monotonic() - t_back < 1.0 + 0.5  # normal again within ~1 s
    assert backend.client().pttl("fg:{closed:gina}") > 0


def stall(backend, seconds):
    """DEBUG SLEEP on its own connection: the whole server stops answering."""
    t = threading.Thread(target=lambda: backend.client().execute_command(
        "DEBUG", "SLEEP", str(seconds)))
    t.start()
    time.sleep(0.05)
    return t


def test_a_stalled_redis_is_answered_by_on_backend_error_within_the_timeout(
        start_server, redis_server, resp_conn):
    """Each event loop runs its own Redis connections: their deadlines are
    kept by the loop itself, which sleeps until the earliest one."""
    backend = redis_server(debug=True)
    config = CONFIG.replace("timeout_ms: 2000", "timeout_ms: 20")  # the default
    server = start_server(config, threads=1, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    assert c.execute_command("FG.CHECK", "closed", "ivy")[0] == 1
    sleeper = stall(backend, 0.5)
    worst = 0.0
    for rule, expected in (("closed", 0), ("open", 1), ("closed", 0)):
        t0 = time.monotonic()
        reply = c.execute_command("FG.CHECK", rule, "ivy")
        worst = max(worst, time.monotonic() - t0)
        assert reply[0] == expected, (rule, reply)
    assert worst < 0.3, worst  # 20 ms, with slack for a loaded machine; not the 0.5 s stall
    # A loop holding decisions back for a call in flight may wait for the
    # store's answer before reading again: never longer than the timeout.
    held = resp_conn(server.resp_port)
    pinger = client(server.resp_port)
    held.send(b"".join(held.encode("FG.CHECK", "closed", f"ivy{i}") for i in range(3)))
    t0 = time.monotonic()
    assert pinger.ping() is True
    assert time.monotonic() - t0 < 0.3
    assert [held.read_reply()[0] for _ in range(3)] == [0, 0, 0]
    sleeper.join()
    t_back = time.monotonic()
    while time.monotonic() - t_back < 2.0:
        if c.execute_command("FG.CHECK", "closed", "ivy")[0] == 1:
            break
        time.sleep(0.01)
    assert time.monotonic() - t_back < 1.0  # normal again within a second
    assert metric(server, "floodgate_backend_errors_total") >= 3


def test_stopping_with_decisions_in_flight_on_a_stalled_redis_is_clean_and_prompt(
        start_server, redis_server, resp_conn):
    """Decisions in flight or held back when the drain time runs out are
    answered by the loops themselves before they go: the process exits
    within the drain time, cleanly (sanitizer builds would report a callback
    reaching a loop that is gone)."""
    backend = redis_server(debug=True)
    server = start_server(CONFIG + "server: { drain_timeout: 300ms }\n", threads=2,
                          extra_args=["--store", backend.url])
    assert client(server.resp_port).execute_command("FG.CHECK", "closed", "jo")[0] == 1
    sleeper = stall(backend, 1.5)
    conns = [resp_conn(server.resp_port) for _ in range(6)]
    for i, conn in enumerate(conns):
        # A pipeline each: the first call stays in flight, the rest is held.
        conn.send(b"".join(conn.encode("FG.CHECK", "closed", f"jo{i}:{j}") for j in range(5)))
    time.sleep(0.2)
    t0 = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - t0 < 1.0, "waited for the stalled Redis"
    sleeper.join()


def test_sigterm_lets_decisions_in_flight_finish(start_server, redis_server, resp_conn):
    """A graceful stop: requests already in flight to a (slow) Redis are
    answered before their connections close, within the drain time."""
    backend = redis_server(debug=True)
    server = start_server(CONFIG, threads=2, extra_args=["--store", backend.url])
    conns = [resp_conn(server.resp_port) for _ in range(4)]
    for i, conn in enumerate(conns):
        # Each connection's loop connects to Redis before the stall: a
        # connect during it would be refused by connect_timeout_ms (500).
        conn.send(conn.encode("FG.CHECK", "closed", f"warm{i}"))
        assert conn.read_reply()[0] == 1
    sleeper = stall(backend, 0.5)
    for i, conn in enumerate(conns):
        conn.send(b"".join(conn.encode("FG.CHECK", "closed", f"grace{i}:{j}") for j in range(3)))
    time.sleep(0.1)
    t0 = time.monotonic()
    server.send_signal(signal.SIGTERM)
    for conn in conns:
        replies = [conn.read_reply() for _ in range(3)]
        assert all(r[0] == 1 for r in replies), replies  # decided by Redis, not refused
        assert conn.read_until_closed(3) == b""
    assert server.wait_exit(3) == 0
    assert time.monotonic() - t0 < 2.0
    sleeper.join()


def wake_ups(pid):
    """Voluntary context switches so far of each of a process's threads, by
    thread id: a thread that sleeps and wakes (epoll_wait, a timer) switches
    voluntarily; being preempted by a busy neighbour on a loaded host is
    involuntary and says nothing about polling."""
    counts = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                counts[task] = sum(int(line.split()[1]) for line in f
                                   if line.startswith("voluntary_ctxt_switches"))
        except FileNotFoundError:
            pass
    return counts


def test_an_idle_server_on_redis_does_not_poll(start_server, backend):
    """Each event loop sleeps on its own epoll, its Redis connections in it:
    with nothing to do it does not wake up (no polling, no periodic timer)."""
    server = start_server(CONFIG, threads=2, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    for i in range(50):
        c.execute_command("FG.CHECK", "closed", f"kim{i}")
    time.sleep(0.3)
    before = wake_ups(server.proc.pid)
    time.sleep(1.5)
    after = wake_ups(server.proc.pid)
    woke = {t: after[t] - before.get(t, 0) for t in after}
    # The embedded store's once-a-second sweep wakes its thread (and a
    # sanitizer's runtime its own, every 100 ms); a loop on a 5 ms timer
    # would show ~300.
    assert max(woke.values()) <= 20, f"wake-ups per thread in 1.5 s idle: {woke}"


def test_local_cache_denies_without_a_round_trip(start_server, backend):
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    c = client(server.resp_port)
    r = backend.client()
    r.config_resetstat()
    replies = [c.execute_command("FG.CHECK", "api", "hank") for _ in range(25)]
    assert [x[0] for x in replies] == [1] * 5 + [0] * 20
    assert all(x[3] > 0 for x in replies[5:])
    stats = r.info("commandstats")
    scripted = sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("evalsha", "eval"))
    # 5 admissions and the first denial reach Redis (EVALSHA, plus EVAL
    # once after NOSCRIPT); the other 19 denials are answered locally.
    assert scripted <= 7, stats
    assert metric(server, "floodgate_local_cache_denials_total") == 19
    # A cheaper request is not the one that was denied: it still asks Redis.
    assert c.execute_command("FG.CHECK", "api", "hank", "COST", "0")[0] == 1


def test_local_cache_can_be_disabled(start_server, backend):
    server = start_server(CONFIG.replace("timeout_ms: 2000", "timeout_ms: 2000, local_cache: false"),
                          extra_args=["--store", backend.url])
    c = client(server.resp_port)
    for _ in range(10):
        c.execute_command("FG.CHECK", "api", "ivan")
    assert metric(server, "floodgate_local_cache_denials_total") == 0


def test_a_bad_store_url_is_refused_clearly(start_server, floodgate_bin, tmp_dir):
    path = tmp_dir / "bad.yaml"
    path.write_text("store: redis://localhost\nrules: { api: { algorithm: fixed_window, limits: [1/s] } }\n")
    out = subprocess.run([str(floodgate_bin), "check-config", str(path)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode != 0
    assert "bad.yaml:1:" in out.stderr + out.stdout
    assert "port" in out.stderr + out.stdout
    out = subprocess.run([str(floodgate_bin), "serve", "--store", "redis://u:sekrit@h"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode != 0
    assert "sekrit" not in out.stderr + out.stdout
