"""Who is being limited (docs/visibility.md), against the real binary: the
binding limit named in a denial (body, Floodgate-Limit, a sampled
msg=denied line), GET /v1/admin/top on the embedded store and merged
across two servers on one real Redis, GET /v1/admin/stats, the event
stream of GET /v1/admin/events, POST /v1/admin/simulate, redact_keys, and
the admin access every one of them sits behind; concurrency rules by
their acquisitions, refusals and leases in flight."""
import http.client
import itertools
import json
import socket
import subprocess
import time

import pytest

from conftest import RespConn, http_get, logfmt

try:
    import redis
except ImportError:  # pragma: no cover - the suite's setup installs python3-redis
    redis = None

RULES = """
rules:
  api: { algorithm: fixed_window, limits: [3/hour, 100/minute] }
  login: { algorithm: sliding_window, limits: [2/minute] }
  trial: { algorithm: fixed_window, limits: [1/hour], shadow: true }
"""

LEASES = """
  jobs: { algorithm: concurrency, max_in_flight: 2, lease_ttl: 60s }
"""


def request(port: int, method: str, path: str, body=None, headers=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    return r.status, raw, {k.lower(): v for k, v in r.getheaders()}


def check(port: int, rule: str, key: str, cost: int = 1):
    status, raw, headers = request(port, "POST", "/v1/check",
                                   {"rule": rule, "key": key, "cost": cost})
    return status, json.loads(raw), headers


def get_json(port: int, path: str, headers=None):
    status, raw, _ = request(port, "GET", path, headers=headers)
    assert status == 200, (status, raw)
    return json.loads(raw)


def denied_lines(server) -> list[dict]:
    return [logfmt(line) for line in server.stderr_text().splitlines() if "msg=denied" in line]


def test_a_denial_names_the_limit_that_bound_it(start_server):
    server = start_server(RULES + "visibility: { denied_log_interval: 1h }\n")
    port = server.http_port
    for _ in range(3):
        status, body, headers = check(port, "api", "bob")
        assert status == 200 and "binding" not in body and "floodgate-limit" not in headers
    status, body, headers = check(port, "api", "bob")
    assert status == 429
    assert body["binding"] == "3/hour"
    assert headers["floodgate-limit"] == "api;3/hour"
    # A shadow rule admits, and still says what would have bound.
    assert check(port, "trial", "t")[0] == 200
    status, body, headers = check(port, "trial", "t")
    assert status == 200 and body["shadow_denied"] is True and body["binding"] == "1/hour"
    # One line per subject per interval, however often it is denied.
    for _ in range(20):
        assert check(port, "api", "bob")[0] == 429
    assert check(port, "api", "carol", cost=4)[0] == 429
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(denied_lines(server)) < 3:
        time.sleep(0.05)
    lines = denied_lines(server)
    by_key = {(line["rule"], line["key"]) for line in lines}
    assert by_key == {("api", "bob"), ("api", "carol"), ("trial", "t")}, lines
    assert len(lines) == 3, lines
    bob = next(line for line in lines if line["key"] == "bob")
    assert bob["limit"] == "3/hour" and int(bob["retry_after_ms"]) > 0
    assert next(line for line in lines if line["key"] == "t")["shadow"] == "true"


def test_top_subjects_on_the_embedded_store(start_server):
    server = start_server(RULES)
    port = server.http_port
    # Denials: bob 12, alice 6, carol 2; admissions: 3 each (api: 3/hour).
    for key, n in (("bob", 15), ("alice", 9), ("carol", 5)):
        for _ in range(n):
            check(port, "api", key)
    top = get_json(port, "/v1/admin/top?rule=api&by=denied&window=1m&limit=2")
    assert top["rule"] == "api" and top["by"] == "denied" and top["window"] == "1m"
    assert top["servers"] == 1
    assert [(s["key"], s["count"], s["error"]) for s in top["subjects"]] == [
        ("bob", 12, 0), ("alice", 6, 0)]
    admitted = get_json(port, "/v1/admin/top?rule=api&by=admitted&window=1h")
    assert sorted((s["key"], s["count"]) for s in admitted["subjects"]) == [
        ("alice", 3), ("bob", 3), ("carol", 3)]
    # Defaults: by denied, 15 minutes, 10 subjects.
    default = get_json(port, "/v1/admin/top?rule=api")
    assert default["by"] == "denied" and default["window"] == "15m"
    assert [s["key"] for s in default["subjects"]] == ["bob", "alice", "carol"]
    # A rule without traffic has an empty list.
    assert get_json(port, "/v1/admin/top?rule=login")["subjects"] == []
    # Bad requests say what is wrong.
    for query, status, needle in (
            ("", 400, "'rule' is required"),
            ("?rule=api&by=allowed", 400, "'by' must be denied or admitted"),
            ("?rule=api&window=2m", 400, "'window' must be 1m, 15m or 1h"),
            ("?rule=api&limit=0", 400, "'limit' must be an integer between 1 and 1000"),
            ("?rule=nope", 404, "unknown rule")):
        got, raw, _ = request(port, "GET", "/v1/admin/top" + query)
        assert got == status and needle in json.loads(raw)["detail"], (query, raw)
    got, raw, headers = request(port, "POST", "/v1/admin/top?rule=api")
    assert got == 405 and headers["allow"] == "GET"


def test_the_sketch_can_be_turned_off(start_server):
    server = start_server(RULES + "visibility: { top_subjects: false }\n")
    check(server.http_port, "api", "bob")
    status, raw, _ = request(server.http_port, "GET", "/v1/admin/top?rule=api")
    assert status == 404 and b"top_subjects: false" in raw
    stats = get_json(server.http_port, "/v1/admin/stats")
    assert stats["top"]["enabled"] is False


def test_stats_count_each_second_of_each_rule(start_server):
    server = start_server(RULES)
    port = server.http_port
    for _ in range(5):
        check(port, "api", "bob")
    for _ in range(4):
        check(port, "login", "eve")
    stats = get_json(port, "/v1/admin/stats")
    assert stats["window_s"] == 900
    rules = {r["rule"]: r for r in stats["rules"]}
    assert set(rules) >= {"api", "login", "trial"}  # every configured rule
    for r in rules.values():
        assert len(r["admitted"]) == len(r["denied"]) == len(r["shadow_denied"]) == 900
    assert sum(rules["api"]["admitted"]) == 3 and sum(rules["api"]["denied"]) == 2
    assert rules["api"]["admitted_total"] == 3 and rules["api"]["denied_total"] == 2
    assert sum(rules["login"]["admitted"]) == 2 and sum(rules["login"]["denied"]) == 2
    assert sum(rules["trial"]["admitted"]) == 0
    assert stats["store"] == {"kind": "memory", "healthy": True}
    assert stats["connections"]["http"]["open"] >= 1
    assert stats["connections"]["resp"]["open"] == 0
    assert stats["top"] == {
        "enabled": True,
        "servers": 1,
        "dropped": 0,
        "sampled_out": 0,
        "untracked": 0,
    }
    assert stats["redact_keys"] is False


def test_concurrency_rules_show_acquired_refused_and_in_flight(start_server):
    """A concurrency rule is counted by its acquisitions, as a rate rule by
    its decisions: acquired and refused per second and in all (a request
    that waited once, by how it ended), the leases in flight, and its top
    subjects by refusals and by acquisitions."""
    server = start_server(RULES + LEASES)
    port = server.http_port
    with RespConn(server.resp_port) as c:
        a = [c.command("FG.ACQUIRE", "jobs", "worker:a") for _ in range(3)]
        assert [x[0] for x in a] == [1, 1, 0], a
        assert c.command("FG.ACQUIRE", "jobs", "worker:b")[0] == 1
        # Held 250 ms, tried every 100 ms: one request, one refusal.
        assert c.command("FG.ACQUIRE", "jobs", "worker:a", "WAIT", 250)[0] == 0
        assert c.command("FG.RELEASE", "jobs", "worker:a", a[0][1]) == 1
    status, raw, _ = request(port, "POST", "/v1/leases", {"rule": "jobs", "key": "worker:a"})
    assert status == 200, raw
    # 4 acquired (a: 3, b: 1), 2 refused (a), 3 in flight (a: 2, b: 1).
    stats = get_json(port, "/v1/admin/stats")
    jobs = next(r for r in stats["rules"] if r["rule"] == "jobs")
    assert len(jobs["acquired"]) == len(jobs["refused"]) == 900, jobs.keys()
    assert sum(jobs["acquired"]) == 4 and sum(jobs["refused"]) == 2, jobs
    assert jobs["acquired_total"] == 4 and jobs["refused_total"] == 2
    assert jobs["in_flight"] == 3
    assert "admitted" not in jobs and "denied" not in jobs  # nothing is decided by a rate
    api = next(r for r in stats["rules"] if r["rule"] == "api")
    assert "acquired" not in api and "in_flight" not in api
    # Its top subjects, in its own words (a rate rule's are synonyms).
    refused = get_json(port, "/v1/admin/top?rule=jobs&window=1m")
    assert refused["by"] == "refused"
    assert [(s["key"], s["count"]) for s in refused["subjects"]] == [("worker:a", 2)]
    acquired = get_json(port, "/v1/admin/top?rule=jobs&by=acquired&window=1m")
    assert acquired["by"] == "acquired"
    assert [(s["key"], s["count"]) for s in acquired["subjects"]] == [
        ("worker:a", 3), ("worker:b", 1)]
    assert get_json(port, "/v1/admin/top?rule=jobs&by=denied")["subjects"] == refused["subjects"]
    status, raw, _ = request(port, "GET", "/v1/admin/top?rule=jobs&by=allowed")
    assert status == 400 and b"refused or acquired" in raw, raw
    # The event stream reports each second's the same way.
    result = read_events(port, 10, done=lambda events: any(
        name == "stats" for name, _ in events))[1]
    second = next(r for r in result[0][1]["rules"] if r["rule"] == "jobs")
    assert set(second) == {"rule", "acquired", "refused", "in_flight"}, second
    assert second["in_flight"] == 3
    # /metrics: a rule that only leases has no decisions.
    metrics = http_get(port, "/metrics").body.decode()
    assert 'floodgate_decisions_total{rule="jobs"' not in metrics
    assert 'floodgate_lease_acquisitions_total{rule="jobs",result="acquired"} 4' in metrics


def test_stats_say_what_simulate_takes(start_server):
    """The dashboard learns from the stats what the simulate route takes:
    the rules it replays (a configured rate rule: not a concurrency rule,
    not CL.THROTTLE) and the largest body, which is exactly the bound the
    server enforces."""
    server = start_server(RULES + LEASES)
    port = server.http_port
    with RespConn(server.resp_port) as c:
        assert c.command("CL.THROTTLE", "t", 1, 1, 60)[0] == 0
        assert c.command("FG.ACQUIRE", "jobs", "k")[0] == 1
    stats = get_json(port, "/v1/admin/stats")
    shown = {r["rule"] for r in stats["rules"]}
    assert {"CL.THROTTLE", "jobs", "api"} <= shown
    simulate = stats["simulate"]
    assert sorted(simulate["rules"]) == ["api", "login", "trial"]
    for rule in sorted(shown):
        status, raw, _ = request(port, "POST", f"/v1/admin/simulate?rule={rule}", "1000,k\n")
        assert (status == 200) == (rule in simulate["rules"]), (rule, status, raw)
    limit = simulate["max_body_bytes"]
    assert limit == 4 * 1024 * 1024 - 8 * 1024

    def send(size: int) -> bytes:
        """POSTs a log of `size` bytes (the body only if the head is taken)."""
        line = b"1700000000000,k\n"
        body = line * (size // len(line) - 1)
        body += b"#" * (size - len(body) - 1) + b"\n"
        assert len(body) == size
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        try:
            s.sendall(b"POST /v1/admin/simulate?rule=api HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n" % size)
            s.settimeout(0.5)
            try:
                answer = s.recv(4096)  # refused from the head alone
            except socket.timeout:
                answer = b""
            s.settimeout(60)
            if not answer:
                s.sendall(body)
                answer = s.recv(4096)
            return answer
        finally:
            s.close()

    assert send(limit).startswith(b"HTTP/1.1 200"), "the bound itself is taken"
    assert send(limit + 1).startswith(b"HTTP/1.1 413"), "one byte more is not"


def parse_events(data: bytes) -> tuple[bytes, list]:
    """The head and the complete events, as (name, data), of a stream read
    so far."""
    head, _, body = data.partition(b"\r\n\r\n")
    events = []
    for block in body.decode(errors="replace").split("\n\n")[:-1]:
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(":"))
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return head, events


def read_events(port: int, seconds: float, headers: str = "", done=None) -> tuple[bytes, list]:
    """Opens GET /v1/admin/events, reads it for `seconds`, or until
    `done(events)` holds; the head and the events as (name, data)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(f"GET /v1/admin/events HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    data = b""
    end = time.monotonic() + seconds
    s.settimeout(0.2)
    while time.monotonic() < end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
        if done is not None and done(parse_events(data)[1]):
            break
    s.close()
    return parse_events(data)


def test_events_stream_each_second(start_server):
    server = start_server(RULES)
    port = server.http_port
    import threading
    result = {}

    def api(events):
        return [next(r for r in data["rules"] if r["rule"] == "api")
                for name, data in events if name == "stats"]

    streaming = threading.Event()  # a first second reported: the stream is open

    def counted(events):  # the checks' seconds reported, and one more since
        if api(events):
            streaming.set()
        sums = itertools.accumulate(r["admitted"] + r["denied"] for r in api(events))
        return any(total >= 6 for total in list(sums)[:-1])

    def reader():
        start = time.monotonic()
        result["head"], result["events"] = read_events(port, 15, done=counted)
        result["seconds"] = time.monotonic() - start

    t = threading.Thread(target=reader)
    t.start()
    assert streaming.wait(10), "no stats event within 10 s"
    for _ in range(6):
        check(port, "api", "bob")  # 3 admitted, 3 denied
    t.join()
    head, events = result["head"], result["events"]
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"Content-Type: text/event-stream" in head
    stats = [data for name, data in events if name == "stats"]
    # One a second: at least the one before the checks and theirs.
    assert 2 <= len(stats) <= result["seconds"] + 1, (result["seconds"], events)
    # Each second reported once: the events add up to the checks exactly.
    rules = api(events)
    assert sum(r["admitted"] for r in rules) == 3 and sum(r["denied"] for r in rules) == 3, rules
    assert stats[-1]["store"]["kind"] == "memory"
    assert "http" in stats[-1]["connections"]
    # The stream is gone with its client: no connection left open but the
    # one asking (kept alive, so that the polls' own closes do not count).
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    deadline = time.monotonic() + 5
    while True:
        conn.request("GET", "/v1/admin/stats")
        open_now = json.loads(conn.getresponse().read())["connections"]["http"]["open"]
        if open_now == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    conn.close()
    assert open_now == 1


def test_a_stream_asked_with_connection_close_still_streams(start_server):
    server = start_server(RULES)
    head, events = read_events(server.http_port, 10, "Connection: close\r\n",
                               done=lambda events: events)
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    assert len([e for e in events if e[0] == "stats"]) >= 1, events


def test_event_streams_are_bounded(start_server):
    server = start_server(RULES)
    port = server.http_port
    socks = []
    try:
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /v1/admin/events HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(15) == b"HTTP/1.1 200 OK"
            socks.append(s)
        status, raw, headers = request(port, "GET", "/v1/admin/events")
        assert status == 503 and headers["retry-after"] == "5", raw
    finally:
        for s in socks:
            s.close()
    # Closed streams make room again.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        head, _ = read_events(port, 0.3)
        if head.startswith(b"HTTP/1.1 200"):
            break
    assert head.startswith(b"HTTP/1.1 200"), head


def test_simulate_route(start_server):
    server = start_server(RULES)
    port = server.http_port
    log = "timestamp_ms,key,cost\n# a comment\n" + "".join(
        f"{1_700_000_000_000 + i * 100},{'bob' if i % 2 else 'alice'}\n" for i in range(20))
    status, raw, headers = request(port, "POST", "/v1/admin/simulate?rule=api", log)
    assert status == 200, raw
    out = json.loads(raw)
    assert out["rule"] == "api" and out["events"] == 20 and out["subjects"] == 2
    assert out["admitted"] == 6 and out["denied"] == 14
    assert out["bucket_ms"] == 1000
    assert sum(p["admitted"] for p in out["series"]) == 6
    assert sum(p["denied"] for p in out["series"]) == 14
    assert out["top_denied"][0]["denied"] == 7
    # The server's own counts are untouched by a replay.
    assert check(port, "api", "bob")[0] == 200
    status, raw, _ = request(port, "POST", "/v1/admin/simulate?rule=api",
                             "1000,bob\n2000,bob,x\n")
    assert status == 400 and "line 2" in json.loads(raw)["detail"], raw
    status, raw, _ = request(port, "POST", "/v1/admin/simulate?rule=nope", "1000,bob\n")
    assert status == 404, raw
    status, raw, _ = request(port, "POST", "/v1/admin/simulate", "1000,bob\n")
    assert status == 400 and b"'rule' is required" in raw
    status, raw, _ = request(port, "GET", "/v1/admin/simulate?rule=api")
    assert status == 405
    # Larger than a connection's input bound: refused from its header alone.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"POST /v1/admin/simulate?rule=api HTTP/1.1\r\nHost: x\r\n"
              b"Content-Length: 5000000\r\n\r\n")
    answer = s.recv(4096)
    s.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer
    # The bound is the route's own: other routes keep theirs.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
    answer = s.recv(4096)
    s.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer
    # A log just under the bound is replayed.
    status, raw, _ = request(port, "POST", "/v1/admin/simulate?rule=api",
                             "1700000000000,k\n" * 200_000, timeout=60)
    assert status == 200 and json.loads(raw)["events"] == 200_000, raw[:200]


def test_redact_keys(start_server):
    server = start_server(RULES + "redact_keys: true\nvisibility: { denied_log_interval: 1h }\n")
    port = server.http_port
    for _ in range(5):
        check(port, "api", "+15551234567")
    top = get_json(port, "/v1/admin/top?rule=api")
    key = top["subjects"][0]["key"]
    assert key.startswith("sha256:") and len(key) == len("sha256:") + 16
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not denied_lines(server):
        time.sleep(0.05)
    assert denied_lines(server)[0]["key"] == key
    assert "+15551234567" not in server.stderr_text()
    assert get_json(port, "/v1/admin/stats")["redact_keys"] is True


def test_admin_access(start_server):
    server = start_server(RULES + "admin: { token_env: FG_TEST_ADMIN, read_token_env: FG_TEST_READ }\n",
                          env={"FG_TEST_ADMIN": "admin-secret", "FG_TEST_READ": "read-secret"})
    port = server.http_port
    for path in ("/v1/admin/top?rule=api", "/v1/admin/stats", "/v1/admin/events"):
        status, _, headers = request(port, "GET", path)
        assert status == 401 and headers["www-authenticate"] == "Bearer", path
    assert get_json(port, "/v1/admin/top?rule=api",
                    headers={"Authorization": "Bearer read-secret"})["subjects"] == []
    head, events = read_events(port, 10, "Authorization: Bearer read-secret\r\n",
                               done=lambda events: events)
    assert head.startswith(b"HTTP/1.1 200") and events, head
    # The replay is a write: the read token may not run one.
    status, _, _ = request(port, "POST", "/v1/admin/simulate?rule=api", "1000,k\n",
                           headers={"Authorization": "Bearer read-secret"})
    assert status == 403
    status, _, _ = request(port, "POST", "/v1/admin/simulate?rule=api", "1000,k\n",
                           headers={"Authorization": "Bearer admin-secret"})
    assert status == 200


def test_two_servers_on_redis_merge_their_top_subjects(start_server, redis_server,
                                                        floodgate_bin):
    if redis is None:
        pytest.fail("python3-redis is missing", pytrace=False)
    backend = redis_server()
    config = (f"store: {backend.url}\nredis: {{ timeout_ms: 2000 }}\n"
              "visibility: { publish_interval: 1s }\n" + RULES)
    a = start_server(config)
    b = start_server(config)
    # bob is denied 4 times through each server, alice 5 through b only.
    for _ in range(4):
        check(a.http_port, "login", "bob")
    for _ in range(2):
        check(b.http_port, "login", "bob")
    for _ in range(7):
        check(b.http_port, "login", "alice")
    want = [("alice", 5), ("bob", 4)]
    deadline = time.monotonic() + 6
    got = None
    while time.monotonic() < deadline:
        top = get_json(a.http_port, "/v1/admin/top?rule=login&window=1m")
        got = [(s["key"], s["count"]) for s in top["subjects"]]
        if got == want and top["servers"] == 2:
            break
        time.sleep(0.2)
    assert got == want and top["servers"] == 2, top
    # b reads the others' sketches once someone asks it (its first answer
    # may be its own alone): within a publish interval it merges a's too.
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        top_b = get_json(b.http_port, "/v1/admin/top?rule=login&window=1m")
        if top_b["servers"] == 2:
            break
        time.sleep(0.2)
    assert [(s["key"], s["count"]) for s in top_b["subjects"]] == want, top_b
    stats = get_json(a.http_port, "/v1/admin/stats")
    assert stats["store"]["kind"] == "redis" and stats["store"]["healthy"] is True
    node = stats["store"]["nodes"][0]
    assert node["address"] == f"127.0.0.1:{backend.port}" and node["up"] is True
    assert node["circuit"] == "closed" and node["latency_ms"] > 0
    # Every key the board writes has a TTL, and audit knows them.
    r = backend.client()
    keys = sorted(k.decode() for k in r.scan_iter(match="fg:{top}:*"))
    assert keys == ["fg:{top}:blobs", "fg:{top}:servers"], keys
    assert all(r.pttl(k) > 0 for k in keys)
    out = subprocess.run([str(floodgate_bin), "audit", "--redis", backend.url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "0 without a TTL" in out.stderr, out
    # A stopped server's sketch expires from the others' lists.
    b.stop()
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        if get_json(a.http_port, "/v1/admin/top?rule=login&window=1m")["servers"] == 1:
            break
        time.sleep(0.2)
    top = get_json(a.http_port, "/v1/admin/top?rule=login&window=1m")
    assert top["servers"] == 1 and [(s["key"], s["count"]) for s in top["subjects"]] == [
        ("bob", 2)], top
