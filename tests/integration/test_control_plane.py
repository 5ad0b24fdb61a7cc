"""The control plane (docs/control-plane.md): overrides, blocks, refunds,
subject state, runtime rules and the change log, on the embedded store
(data_dir) and shared by two servers on one real Redis, a Redis Cluster and
Twemproxy."""
import json
import threading
import time

import pytest

from conftest import RespConn, RespError, avoid_window_edge, start_nutcracker, until
from test_redis_leaks import cluster  # noqa: F401  (a fixture)

RULES = """
rules:
  api: { algorithm: fixed_window, limits: [3/hour] }
  login: { algorithm: sliding_window, limits: [2/hour], block_for: 20s }
  g: { algorithm: gcra, limits: [10/s] }
"""

ADMIN = "s3cret-admin-token"
READ = "r3ad-only-token"


def http(port: int, method: str, path: str, body=None, token: str | None = None):
    """(status, parsed JSON or None, headers) of one request."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return r.status, parsed, dict(r.getheaders())


def assert_error(reply, words: str) -> None:
    assert isinstance(reply, RespError) and words in str(reply), reply


def check(port: int, rule: str, key: str, cost: int = 1) -> tuple[int, dict]:
    status, body, _ = http(port, "GET", f"/v1/check?rule={rule}&key={key}&cost={cost}")
    return status, body


# --- two servers sharing a store -------------------------------------------

@pytest.fixture
def twemproxy(tmp_dir, redis_server):
    backends = [redis_server(), redis_server()]
    proc, port = start_nutcracker(tmp_dir, backends)
    yield f"redis+proxy://127.0.0.1:{port}"
    proc.kill()
    proc.wait(5)


@pytest.fixture(params=["redis", "cluster", "twemproxy"])
def shared_store(request, redis_server):
    if request.param == "redis":
        return redis_server().url
    if request.param == "cluster":
        ports = request.getfixturevalue("cluster")
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
    return request.getfixturevalue("twemproxy")


def two_servers(start_server, store_url: str, extra: str = ""):
    # A timeout no slow machine reaches: a timed-out decision would be
    # answered by on_backend_error (allow) and break the exact counts.
    config = f"store: {store_url}\nredis: {{ timeout_ms: 2000 }}\n{extra}{RULES}"
    return start_server(config, threads=1), start_server(config, threads=1), config


def test_changes_on_one_server_are_in_force_on_the_other(start_server, shared_store):
    avoid_window_edge(3600, margin_s=60)
    a, b, config = two_servers(start_server, shared_store)
    # An override set on A: B admits per it within 1 s.
    status, body, _ = http(a.http_port, "PUT", "/v1/admin/overrides/api/user:1",
                           {"limits": ["5/hour"], "ttl_ms": 600000, "reason": "vip"})
    assert status == 200 and body["limits"] == ["5/hour"], body
    start = time.monotonic()
    until(lambda: http(b.http_port, "GET", "/v1/admin/subjects/api/user:1")[1]
          ["limits"][0]["limit"] == 5, 1.0, "the override on the other server")
    assert time.monotonic() - start < 1.0
    admitted = [check(b.http_port, "api", "user:1")[0] for _ in range(7)]
    assert admitted == [200] * 5 + [429] * 2, admitted

    # A block set on A denies on B with the time left and the reason.
    status, body, _ = http(a.http_port, "PUT", "/v1/admin/blocks/mallory",
                           {"ttl_ms": 60000, "reason": "card testing"})
    assert status == 200, body
    # Watched through the subject's state (a peek: checks would spend units).
    until(lambda: http(b.http_port, "GET", "/v1/admin/subjects/api/mallory")[1]["blocks"], 1.0,
          "the block on B")
    status, body = check(b.http_port, "login", "mallory")
    assert status == 429 and body["blocked"] is True and body["reason"] == "card testing", body
    assert 55000 <= body["retry_after_ms"] <= 60000, body

    # A refund on A re-admits exactly the refunded units on B.
    for _ in range(3):
        assert check(b.http_port, "api", "bob")[0] == 200
    assert check(b.http_port, "api", "bob")[0] == 429
    status, body, _ = http(a.http_port, "POST", "/v1/admin/subjects/api/bob/refund", {"cost": 2})
    assert status == 200 and body["limits"][0]["remaining"] == 2, body
    # B answered its denial from its local cache, which holds one for a
    # second at most: after it, B asks Redis, which has the units back.
    time.sleep(1.05)
    assert [check(b.http_port, "api", "bob")[0] for _ in range(3)] == [200, 200, 429]

    # A runtime rule on A is served by B.
    status, body, _ = http(a.http_port, "PUT", "/v1/admin/rules/signup",
                           {"algorithm": "fixed_window", "limits": ["1/hour"]})
    assert status == 200, body
    until(lambda: check(b.http_port, "signup", "x")[0] != 404, 1.0, "the runtime rule on B")

    # A restarted server keeps them all.
    b.stop()
    b2 = start_server(config, threads=1)
    assert http(b2.http_port, "GET", "/v1/admin/overrides/api/user:1")[1]["limits"] == ["5/hour"]
    status, body = check(b2.http_port, "api", "mallory")
    assert status == 429 and body["reason"] == "card testing", body
    assert check(b2.http_port, "signup", "y")[0] == 200
    assert check(b2.http_port, "signup", "y")[0] == 429


def test_64_clients_while_the_override_changes(start_server, redis_server):
    """Every admission is one the limit in force allowed: the first override
    admits exactly its limit, and the second (its own state) exactly its."""
    avoid_window_edge(3600, margin_s=60)
    a, b, _ = two_servers(start_server, redis_server().url)
    assert http(a.http_port, "PUT", "/v1/admin/overrides/api/hot",
                {"limits": ["200/hour"]})[0] == 200
    until(lambda: http(b.http_port, "GET", "/v1/admin/subjects/api/hot")[1]
          ["limits"][0]["limit"] == 200, 1.0, "the first override on B")
    admitted = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def client(i: int) -> None:
        port = (a if i % 2 else b).resp_port
        with RespConn(port, timeout=10) as c:
            while not stop.is_set():
                if c.command("FG.CHECK", "api", "hot")[0] == 1:
                    with lock:
                        admitted[0] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    try:
        until(lambda: admitted[0] >= 200, 10, "the first override's 200 admissions")
        time.sleep(0.3)
        assert admitted[0] == 200
        assert http(a.http_port, "PUT", "/v1/admin/overrides/api/hot",
                    {"limits": ["300/hour"]})[0] == 200
        until(lambda: admitted[0] >= 500, 10, "the second override's 300 admissions")
        time.sleep(1.2)  # both servers have long applied it
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert admitted[0] == 500


# --- access ----------------------------------------------------------------

def test_unauthenticated_and_read_token_writes_change_nothing(start_server):
    config = "admin: { token_env: FG_ADMIN_TOKEN, read_token_env: FG_READ_TOKEN }\n" + RULES
    s = start_server(config, env={"FG_ADMIN_TOKEN": ADMIN, "FG_READ_TOKEN": READ})
    put = {"limits": ["50/hour"]}
    status, body, headers = http(s.http_port, "PUT", "/v1/admin/overrides/api/k", put)
    assert status == 401 and headers.get("WWW-Authenticate") == "Bearer", body
    assert http(s.http_port, "PUT", "/v1/admin/overrides/api/k", put, token="wrong")[0] == 401
    status, body, _ = http(s.http_port, "PUT", "/v1/admin/overrides/api/k", put, token=READ)
    assert status == 403 and "read token" in body["detail"], body
    assert http(s.http_port, "PUT", "/v1/admin/blocks/k", {"ttl_ms": 1000}, token=READ)[0] == 403
    assert http(s.http_port, "GET", "/v1/admin/overrides")[0] == 401
    with RespConn(s.resp_port) as c:
        assert_error(c.command("FG.OVERRIDE", "SET", "api", "k", "0", "50/hour"), "NOPERM")
        assert c.command("AUTH", READ) == "OK"
        assert_error(c.command("FG.BLOCK", "k", "1000"), "NOPERM")
        assert c.command("FG.OVERRIDE", "GET", "api", "k") is None
    # Nothing changed.
    status, body, _ = http(s.http_port, "GET", "/v1/admin/overrides", token=READ)
    assert status == 200 and body == {"overrides": []}, body
    assert http(s.http_port, "GET", "/v1/admin/blocks", token=READ)[1] == {"blocks": []}
    assert http(s.http_port, "GET", "/v1/admin/log", token=ADMIN)[1] == {"entries": []}
    # The admin token writes, over HTTP and RESP.
    assert http(s.http_port, "PUT", "/v1/admin/overrides/api/k", put, token=ADMIN)[0] == 200
    with RespConn(s.resp_port) as c:
        assert c.command("AUTH", ADMIN) == "OK"
        assert c.command("FG.BLOCK", "k", "60000", "REASON", "test") == "OK"
    log = http(s.http_port, "GET", "/v1/admin/log", token=READ)[1]["entries"]
    assert [e["action"] for e in log] == ["block.set", "override.set"], log
    assert all(e["who"] == "admin" and e["peer"].startswith("127.0.0.1:") for e in log), log
    assert log[1]["before"] is None and log[1]["after"]["limits"] == ["50/hour"], log
    assert s.wait_for(r'msg="admin change" who=admin .*action=override.set', 2)


def test_bad_input_is_refused_and_changes_nothing(start_server):
    s = start_server(RULES)
    port = s.http_port
    cases = [
        ("PUT", "/v1/admin/overrides/nope/k", {"limits": ["5/s"]}, 404, "unknown rule 'nope'"),
        ("PUT", "/v1/admin/overrides/api/k", {"limits": ["5/fortnight"]}, 400, "limits[0]"),
        ("PUT", "/v1/admin/overrides/api/k", {"limits": "5/s"}, 400, "limits"),
        ("PUT", "/v1/admin/overrides/api/k", {"limits": ["5/s"], "ttl": 5}, 400, "unknown field"),
        ("PUT", "/v1/admin/overrides/g/k", {"limits": ["10000/ms"]}, 400, "too fine for gcra"),
        ("PUT", "/v1/admin/overrides/api/k", "{not json", 400, "JSON object"),
        ("PUT", "/v1/admin/blocks/k", {"reason": "no ttl"}, 400, "ttl_ms"),
        ("PUT", "/v1/admin/blocks/k", {"ttl_ms": 0}, 400, "ttl_ms"),
        ("PUT", "/v1/admin/blocks/k", {"ttl_ms": 1000, "rule": "nope"}, 404, "unknown rule"),
        ("POST", "/v1/admin/subjects/api/k/refund", {"cost": 0}, 400, "cost"),
        ("POST", "/v1/admin/subjects/nope/k/refund", {"cost": 1}, 404, "unknown rule"),
        ("PUT", "/v1/admin/rules/api", {"limits": ["1/s"]}, 409, "config file"),
        ("DELETE", "/v1/admin/rules/api", None, 409, "config file"),
        ("PUT", "/v1/admin/rules/new", {"limits": ["1/fortnight"]}, 400, "fortnight"),
        ("PUT", "/v1/admin/rules/new", {"algorithm": "magic", "limits": ["1/s"]}, 400, "magic"),
        ("DELETE", "/v1/admin/overrides/api/none", None, 404, "no override"),
        ("GET", "/v1/admin/subjects/nope/k", None, 404, "unknown rule"),
        ("GET", "/v1/admin/nothing", None, 404, "no admin route"),
    ]
    for method, path, body, want, words in cases:
        status, got, headers = http(port, method, path, body)
        assert status == want, (method, path, status, got)
        assert headers.get("Content-Type") == "application/problem+json", headers
        assert words in got["detail"], (path, got)
    assert http(port, "GET", "/v1/admin/overrides")[1] == {"overrides": []}
    assert http(port, "GET", "/v1/admin/blocks")[1] == {"blocks": []}
    assert http(port, "GET", "/v1/admin/log")[1] == {"entries": []}
    assert check(port, "new", "k")[0] == 404


# --- embedded store: data_dir ----------------------------------------------

def test_embedded_records_survive_a_sigterm_restart(start_server, tmp_dir):
    avoid_window_edge(3600, margin_s=60)
    data = tmp_dir / "data"
    data.mkdir()
    config = f"data_dir: {data}\n{RULES}"
    s = start_server(config)
    assert http(s.http_port, "PUT", "/v1/admin/overrides/api/u", {"limits": ["4/hour"]})[0] == 200
    assert http(s.http_port, "PUT", "/v1/admin/blocks/b", {"ttl_ms": 60000, "rule": "api",
                                                          "reason": "why"})[0] == 200
    assert http(s.http_port, "PUT", "/v1/admin/rules/rt",
                {"algorithm": "token_bucket", "limits": ["2/hour"]})[0] == 200
    # block_for: the third login of a subject is denied, and it is blocked.
    assert [check(s.http_port, "login", "p")[0] for _ in range(3)] == [200, 200, 429]
    s.stop()
    s2 = start_server(config)
    assert http(s2.http_port, "GET", "/v1/admin/overrides/api/u")[1]["limits"] == ["4/hour"]
    status, body = check(s2.http_port, "api", "b")
    assert status == 429 and body["reason"] == "why", body
    assert check(s2.http_port, "login", "b")[0] == 200  # blocked on api only
    status, body = check(s2.http_port, "login", "p")
    assert status == 429 and body.get("blocked") is True, body
    assert [check(s2.http_port, "rt", "x")[0] for _ in range(3)] == [200, 200, 429]
    # A SIGHUP reload of the file keeps the runtime rule.
    mark = s2.reload(config + "  more: { algorithm: fixed_window, limits: [1/s] }\n")
    assert s2.wait_for(r'msg="config reloaded"', 5, start=mark), s2.stderr_text()
    assert check(s2.http_port, "rt", "x")[0] == 429
    assert check(s2.http_port, "more", "x")[0] == 200
    # Deleting undoes each.
    assert http(s2.http_port, "DELETE", "/v1/admin/overrides/api/u")[0] == 200
    assert http(s2.http_port, "DELETE", "/v1/admin/blocks/b")[0] == 200
    assert http(s2.http_port, "DELETE", "/v1/admin/rules/rt")[0] == 200
    assert check(s2.http_port, "rt", "x")[0] == 404
    assert check(s2.http_port, "api", "b")[0] == 200


def test_a_corrupt_data_dir_is_refused_with_a_clear_error(start_server, tmp_dir):
    data = tmp_dir / "bad"
    data.mkdir()
    (data / "control.db").write_text("not a control file\n")
    s = start_server(f"data_dir: {data}\n{RULES}", wait_listening=False)
    assert s.wait_exit(10) == 1
    assert "control.db is corrupt" in s.stderr_text(), s.stderr_text()


def test_resp_admin_commands(start_server):
    avoid_window_edge(3600, margin_s=60)
    s = start_server(RULES)
    with RespConn(s.resp_port) as c:
        assert c.command("FG.OVERRIDE", "SET", "api", "k", "0", "6/hour") == "OK"
        assert c.command("FG.OVERRIDE", "GET", "api", "k") == [[b"6/hour"], -1, b""]
        assert c.command("FG.CHECK", "api", "k")[:3] == [1, 6, 5]
        limits, override, block_ms, reason = c.command("FG.STATE", "api", "k")
        assert limits[0][:3] == [6, 1, 5] and 0 < limits[0][3] <= 3600000, limits
        assert (override, block_ms, reason) == ([b"6/hour"], 0, b"")
        assert c.command("FG.REFUND", "api", "k", "1")[:3] == [1, 6, 6]
        assert c.command("FG.BLOCK", "k", "30000", "RULE", "api", "REASON", "x") == "OK"
        allowed, limit, remaining, retry, _ = c.command("FG.CHECK", "api", "k")
        assert allowed == 0 and 25000 < retry <= 30000
        state = c.command("FG.STATE", "api", "k")
        assert 25000 < state[2] <= 30000 and state[3] == b"x"
        assert c.command("FG.UNBLOCK", "k") == 1
        assert c.command("FG.UNBLOCK", "k") == 0
        assert c.command("FG.OVERRIDE", "DEL", "api", "k") == 1
        assert c.command("FG.OVERRIDE", "GET", "api", "k") is None
        assert_error(c.command("FG.BLOCK", "k", "0"), "from 1 to 31622400000")
        assert_error(c.command("FG.OVERRIDE", "SET", "nope", "k", "0", "1/s"), "unknown rule")
        assert_error(c.command("FG.REFUND", "api", "k", "0"), "cost")


# --- refunds and block_for, on each store ----------------------------------

@pytest.fixture(params=["memory", "redis"])
def any_store(request, redis_server):
    return "memory" if request.param == "memory" else redis_server().url


COUNTED = """
rules:
  fixed: { algorithm: fixed_window, limits: [5/hour] }
  sliding: { algorithm: sliding_window, limits: [5/hour] }
  log: { algorithm: sliding_log, limits: [5/hour] }
  bucket: { algorithm: token_bucket, limits: [5/hour] }
  gcra: { algorithm: gcra, limits: [5/hour] }
  two: { algorithm: fixed_window, limits: [5/s, 10/hour] }
"""


def test_a_refund_answers_the_units_given_back(start_server, any_store):
    avoid_window_edge(3600, margin_s=60)
    s = start_server(f"store: {any_store}\nredis: {{ timeout_ms: 2000 }}\n{COUNTED}")
    for rule in ("fixed", "sliding", "log", "bucket", "gcra"):
        assert check(s.http_port, rule, "u")[0] == 200
        # One unit used: a refund of 100 gives back that one, not 100.
        status, body, _ = http(s.http_port, "POST", f"/v1/admin/subjects/{rule}/u/refund",
                               {"cost": 100})
        assert status == 200, (rule, body)
        assert body["refunded"] == 1, (rule, body)
        assert [(l["refunded"], l["used"], l["remaining"]) for l in body["limits"]] == \
            [(1, 0, 5)], (rule, body)
        # Nothing used: nothing given back.
        status, body, _ = http(s.http_port, "POST", f"/v1/admin/subjects/{rule}/u/refund",
                               {"cost": 3})
        assert status == 200 and body["refunded"] == 0, (rule, body)
        assert body["limits"][0]["refunded"] == 0, (rule, body)
    # Each limit says what it gave back; the answer, the most any did.
    assert check(s.http_port, "two", "u", cost=2)[0] == 200
    second = time.time()
    time.sleep(max(0.0, 1.02 - (second % 1.0)))  # into the next second's window
    status, body, _ = http(s.http_port, "POST", "/v1/admin/subjects/two/u/refund", {"cost": 5})
    assert status == 200, body
    assert [l["refunded"] for l in body["limits"]] == [0, 2], body
    assert body["refunded"] == 2, body
    # FG.REFUND keeps FG.CHECK's reply: the state after.
    assert check(s.http_port, "fixed", "r")[0] == 200
    with RespConn(s.resp_port) as c:
        assert c.command("FG.REFUND", "fixed", "r", "100")[:3] == [1, 5, 5]


def test_the_denial_that_starts_a_block_answers_as_the_block(start_server, any_store):
    avoid_window_edge(3600, margin_s=60)
    s = start_server(f"store: {any_store}\nredis: {{ timeout_ms: 2000 }}\n{RULES}")
    assert [check(s.http_port, "login", "p")[0] for _ in range(2)] == [200, 200]
    status, first = check(s.http_port, "login", "p")
    # The block's own denial: blocked, its reason, its time left.
    assert status == 429 and first.get("blocked") is True, first
    assert 19000 < first["retry_after_ms"] <= 20000, first
    assert first["reason"], first
    # Listed at once, without waiting for the store.
    blocks = http(s.http_port, "GET", "/v1/admin/blocks")[1]["blocks"]
    assert [(b["key"], b["rule"]) for b in blocks] == [("p", "login")], blocks
    assert 19000 < blocks[0]["expires_in_ms"] <= 20000, blocks
    state = http(s.http_port, "GET", "/v1/admin/subjects/login/p")[1]
    assert [b["rule"] for b in state["blocks"]] == ["login"], state
    # The next denial is the same answer, the time left aside.
    status, then = check(s.http_port, "login", "p")
    assert status == 429, then

    def timeless(body):
        if isinstance(body, dict):
            return {k: timeless(v) for k, v in body.items() if not k.endswith("_ms")}
        return [timeless(v) for v in body] if isinstance(body, list) else body
    assert timeless(then) == timeless(first), (first, then)
    # On RESP too: FG.CHECK's denial names the block's wait, FG.STATE the block.
    with RespConn(s.resp_port) as c:
        assert c.command("FG.CHECK", "login", "q")[0] == 1
        assert c.command("FG.CHECK", "login", "q")[0] == 1
        allowed, limit, remaining, retry, reset = c.command("FG.CHECK", "login", "q")
        assert (allowed, remaining) == (0, 0) and 19000 < retry <= 20000 and reset == retry
        _, _, block_ms, reason = c.command("FG.STATE", "login", "q")
        assert 19000 < block_ms <= 20000 and reason, (block_ms, reason)
