"""Reservations and priorities (docs/reservations.md), with redis-py over RESP
and HTTP: 64 concurrent clients reserving and settling random estimates and
actuals on two servers sharing one real redis-server (and on the embedded
store) leave the subject charged exactly the sum of the actuals plus the
estimates left unsettled, never below zero, every key with a TTL; a client
killed between reserve and settle costs its estimate, at its TTL, and
nothing else; priority classes keep their share exactly under 64 clients;
bad input is refused with a clear error and charges nothing; an Envoy
descriptor entry `priority` names the class over gRPC."""
import json
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import NODE_GRPC_DIR
from test_control_plane import http

try:
    import redis
except ImportError:  # pragma: no cover - the suite's setup installs it
    redis = None

LIMIT = 1_000_000_000
# Epoch-aligned windows of 1000 hours: a run never spans two.
RULES = f"""\
rules:
  tokens: {{ algorithm: fixed_window, limits: [{LIMIT}/1000h] }}
  small: {{ algorithm: fixed_window, limits: [100/1000h] }}
  api:
    algorithm: fixed_window
    limits: [1000/1000h]
    priorities: {{ critical: 0%, default: 20%, batch: 40% }}
  bucket: {{ algorithm: token_bucket, limits: [10/hour] }}
"""
CLIENTS = 64


def client(port):
    if redis is None:
        pytest.fail("the Python 'redis' module is missing: apt-get install -y python3-redis",
                    pytrace=False)
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=20)


def used(c, rule: str, key: str) -> int:
    """What the subject has used of a fixed_window rule: a cost-0 check."""
    reply = c.execute_command("FG.CHECK", rule, key, "COST", 0)
    return reply[1] - reply[2]


def hammer(ports: list[int], key: str, rounds: int, seed: int) -> dict:
    """CLIENTS threads, each with a connection per server, reserving on one
    server and settling on another at random; one in eight reservations is
    left unsettled. What the subject should have been charged."""
    totals = {"expected": 0, "settled": 0, "unsettled": 0, "errors": []}
    lock = threading.Lock()

    def run(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        conns = [client(p) for p in ports]
        expected = settled = unsettled = 0
        try:
            for _ in range(rounds):
                estimate = rng.randint(1, 100)
                a, b = rng.choice(conns), rng.choice(conns)
                admitted, rid, _, _ = a.execute_command("FG.RESERVE", "tokens", key, estimate)
                assert admitted == 1 and rid, (admitted, rid)
                if rng.random() < 0.125:
                    expected += estimate
                    unsettled += 1
                    continue
                actual = rng.randint(0, 150)
                charged, remaining = b.execute_command("FG.SETTLE", "tokens", key, rid, actual)
                assert charged == actual, (charged, actual)
                assert remaining >= 0
                expected += actual
                settled += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            with lock:
                totals["errors"].append(repr(e))
        with lock:
            totals["expected"] += expected
            totals["settled"] += settled
            totals["unsettled"] += unsettled

    threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "clients still running after 120 s"
    return totals


def keys_without_ttl(r) -> list:
    return [k for k in r.scan_iter(match="*", count=1000) if r.pttl(k) < 0]


def test_exact_with_64_clients_on_two_servers_sharing_one_redis(start_server, redis_server,
                                                                floodgate_bin):
    backend = redis_server()
    servers = [start_server(RULES, extra_args=["--store", backend.url]) for _ in range(2)]
    ports = [s.resp_port for s in servers]
    totals = hammer(ports, "user:1", rounds=25, seed=1)
    assert totals["errors"] == []
    assert totals["settled"] > 1000 and totals["unsettled"] > 100
    for port in ports:  # both servers see the one state
        assert used(client(port), "tokens", "user:1") == totals["expected"]
    r = backend.client()
    assert keys_without_ttl(r) == []
    out = subprocess.run([str(floodgate_bin), "audit", "--redis", backend.url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "0 without a TTL" in out.stderr


def test_exact_with_64_clients_on_the_embedded_store(start_server):
    server = start_server(RULES)
    totals = hammer([server.resp_port], "user:2", rounds=25, seed=2)
    assert totals["errors"] == []
    assert used(client(server.resp_port), "tokens", "user:2") == totals["expected"]


KILLED = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"*6\\r\\n$10\\r\\nFG.RESERVE\\r\\n$5\\r\\nsmall\\r\\n$3\\r\\nkim\\r\\n$2\\r\\n30\\r\\n"
          b"$3\\r\\nTTL\\r\\n$3\\r\\n800\\r\\n")
data = b""
while data.count(b"\\r\\n") < 6:
    data += s.recv(4096)
print(data.split(b"\\r\\n")[3].decode(), flush=True)  # the reservation's id
time.sleep(60)  # killed before it settles
"""


@pytest.mark.parametrize("store", ["redis", "memory"])
def test_a_killed_client_is_charged_its_estimate_at_the_ttl(start_server, redis_server, store):
    extra = ["--store", redis_server().url] if store == "redis" else []
    server = start_server(RULES, extra_args=extra)
    c = client(server.resp_port)
    assert used(c, "small", "kim") == 0
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(server.resp_port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        rid = proc.stdout.readline().strip()
        assert len(rid) == 32, rid
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert used(c, "small", "kim") == 30
    time.sleep(1.0)  # past its TTL (800 ms)
    with pytest.raises(redis.ResponseError, match="no reservation"):
        c.execute_command("FG.SETTLE", "small", "kim", rid, 0)
    assert used(c, "small", "kim") == 30  # the estimate, and nothing else
    assert used(c, "small", "other") == 0


def test_priorities_keep_their_share_exactly_under_64_clients(start_server, redis_server):
    backend = redis_server()
    servers = [start_server(RULES, extra_args=["--store", backend.url]) for _ in range(2)]
    ports = [s.resp_port for s in servers]

    def flood(priority: str | None, each: int) -> int:
        admitted = [0]
        lock = threading.Lock()

        def run(n: int) -> None:
            c = client(ports[n % 2])
            args = ["FG.CHECK", "api", "acme"] + (["PRIORITY", priority] if priority else [])
            mine = sum(c.execute_command(*args)[0] for _ in range(each))
            with lock:
                admitted[0] += mine

        threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return admitted[0]

    # A batch flood takes its 60 % and no more; the others still have 40 %:
    # default up to 80 %, critical up to the limit itself.
    assert flood("batch", 20) == 600
    assert flood(None, 10) == 200
    assert flood("default", 2) == 0
    assert flood("critical", 10) == 200
    assert flood("critical", 1) == 0
    status, body, _ = http(servers[0].http_port, "GET", "/v1/admin/stats")
    assert status == 200, body
    counts = {(p["rule"], p["class"]): p for p in body["priorities"]}
    # Each server counts its own decisions; the two together are the flood.
    assert counts[("api", "batch")]["keep_percent"] == 40
    both = [http(s.http_port, "GET", "/v1/admin/stats")[1]["priorities"] for s in servers]
    admitted = {c: sum(p["admitted"] for b in both for p in b if p["class"] == c)
                for c in ("batch", "default", "critical")}
    denied = {c: sum(p["denied"] for b in both for p in b if p["class"] == c)
              for c in ("batch", "default", "critical")}
    assert admitted == {"batch": 600, "default": 200, "critical": 200}
    assert denied == {"batch": 64 * 20 - 600, "default": 64 * 12 - 200,
                      "critical": 64 * 11 - 200}


def test_http_reserve_and_settle_report_debt_and_errors(start_server):
    server = start_server(RULES)
    port = server.http_port
    status, body, headers = http(port, "POST", "/v1/reservations",
                                 {"rule": "small", "key": "ann", "estimate": 40})
    assert status == 200, body
    assert body["allowed"] is True and body["remaining"] == 60 and body["estimate"] == 40
    assert body["ttl_ms"] == 300000 and len(body["reservation"]) == 32
    assert "RateLimit" in headers
    rid = body["reservation"]
    path = f"/v1/reservations/small/ann/{rid}/settle"
    status, body, _ = http(port, "POST", path, {"actual": 130})
    assert status == 200, body
    assert body == {"rule": "small", "key": "ann", "reservation": rid, "estimate": 40,
                    "actual": 130, "charged": 130, "remaining": -30, "debt": 30}
    # In debt: denied until the window covers it.
    status, body, headers = http(port, "POST", "/v1/check", {"rule": "small", "key": "ann"})
    assert status == 429 and "Retry-After" in headers
    # Settled once.
    status, body, _ = http(port, "POST", path, {"actual": 1})
    assert status == 409 and "settled already" in body["detail"], body
    # An estimate that does not fit: 429, nothing held, nothing charged.
    status, body, _ = http(port, "POST", "/v1/reservations",
                           {"rule": "small", "key": "bob", "estimate": 101})
    assert status == 429 and body["reservation"] is None and body["retry_after_ms"] == -1, body
    c = client(server.resp_port)
    assert used(c, "small", "bob") == 0
    # Bad input: clear 400s, nothing charged.
    for bad in ({"rule": "small", "key": "bob", "estimate": 0},
                {"rule": "small", "key": "bob", "estimate": 1.5},
                {"rule": "small", "key": "bob", "estimate": 5, "ttl_ms": 0},
                {"rule": "small", "key": "bob", "estimate": 5, "priority": "vip"},
                {"rule": "nope", "key": "bob", "estimate": 5},
                {"rule": "small", "key": "bob"}):
        status, body, _ = http(port, "POST", "/v1/reservations", bad)
        assert status in (400, 404), (bad, status, body)
        assert body["detail"], body
    assert used(c, "small", "bob") == 0
    status, body, _ = http(port, "POST", "/v1/reservations",
                           {"rule": "small", "key": "bob", "estimate": 10})
    rid = body["reservation"]
    for bad in ({"actual": -1}, {"actual": 2.5}, {"actual": "3"}, {}):
        status, body, _ = http(port, "POST", f"/v1/reservations/small/bob/{rid}/settle", bad)
        assert status == 400, (bad, status, body)
    status, body, _ = http(port, "POST", f"/v1/reservations/small/eve/{rid}/settle",
                           {"actual": 1})
    assert status == 404 and "no reservation" in body["detail"], body
    status, body, _ = http(port, "POST", "/v1/reservations/small/bob/" + "0" * 32 + "/settle",
                           {"actual": 1})
    assert status == 404, body
    assert used(c, "small", "bob") == 10  # nothing of the above touched it
    status, body, _ = http(port, "POST", f"/v1/reservations/small/bob/{rid}/settle",
                           {"actual": 4})
    assert status == 200 and body["charged"] == 4 and body["remaining"] == 96, body


def test_resp_errors_are_clear_and_change_nothing(start_server):
    server = start_server(RULES)
    c = client(server.resp_port)
    rid = c.execute_command("FG.RESERVE", "small", "cat", 10)[1].decode()
    cases = [
        (("FG.SETTLE", "small", "cat", "0" * 32, 1), "no reservation"),
        (("FG.SETTLE", "small", "dog", rid, 1), "no reservation"),  # another key's id
        (("FG.SETTLE", "small", "cat", rid, -1), "actual must be an integer"),
        (("FG.SETTLE", "small", "cat", rid, "1.5"), "actual must be an integer"),
        (("FG.RESERVE", "small", "cat", 0), "estimate must be an integer"),
        (("FG.RESERVE", "small", "cat", "x"), "estimate must be an integer"),
        (("FG.RESERVE", "small", "cat", 5, "TTL", 0), "TTL must be an integer"),
        (("FG.RESERVE", "small", "cat", 5, "FAST"), "unknown option"),
        (("FG.RESERVE", "api", "cat", 5, "PRIORITY", "vip"), "no priority class 'vip'"),
        (("FG.CHECK", "api", "cat", "PRIORITY", "vip"), "no priority class 'vip'"),
        (("FG.RESERVE", "nope", "cat", 5), "unknown rule"),
    ]
    for args, words in cases:
        with pytest.raises(redis.ResponseError, match=words):
            c.execute_command(*args)
    assert used(c, "small", "cat") == 10
    assert used(c, "api", "cat") == 0
    assert c.execute_command("FG.SETTLE", "small", "cat", rid, 3) == [3, 97]
    with pytest.raises(redis.ResponseError, match="settled already"):
        c.execute_command("FG.SETTLE", "small", "cat", rid, 3)
    # Reserved too much on a token bucket: the difference comes back.
    admitted, rid, remaining, _ = c.execute_command("FG.RESERVE", "bucket", "cat", 8)
    assert admitted == 1 and remaining == 2
    assert c.execute_command("FG.SETTLE", "bucket", "cat", rid, 5) == [5, 5]


def test_a_descriptor_entry_priority_names_the_class_over_grpc(start_server, tmp_dir, node_ready):
    conf = tmp_dir / "ratelimit"
    conf.mkdir()
    (conf / "api.yaml").write_text("""\
domain: api
descriptors:
  - key: user
    rate_limit: { floodgate_rule: api }
""")
    server = start_server(RULES + f"envoy_ratelimit: {conf}\n", grpc="127.0.0.1:0")

    def call(priority, hits):
        entries = [{"key": "user", "value": "u1"}]
        if priority:
            entries.append({"key": "priority", "value": priority})
        request = {"domain": "api", "descriptors": [{"entries": entries}], "hits_addend": hits}
        out = subprocess.run([node_ready, "call.js", str(server.grpc_port), json.dumps(request)],
                             cwd=NODE_GRPC_DIR, capture_output=True, text=True, timeout=60)
        return out

    ok = call("batch", 600)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["overall_code"] == "OK"
    out = call("batch", 1)  # batch has used its 60 %
    assert json.loads(out.stdout)["overall_code"] == "OVER_LIMIT", out.stdout
    out = call(None, 200)  # default: up to 80 %, one subject with batch's
    assert json.loads(out.stdout)["overall_code"] == "OK", out.stdout
    out = call("critical", 200)
    assert json.loads(out.stdout)["overall_code"] == "OK", out.stdout
    out = call("critical", 1)
    assert json.loads(out.stdout)["overall_code"] == "OVER_LIMIT", out.stdout
    out = call("vip", 1)  # an unknown class fails the call (Envoy's failure_mode decides)
    assert out.returncode == 1 and "no priority class 'vip'" in out.stderr, out.stderr
