"""Expiring sets end to end: FG.SADD / FG.SMEMBERS / FG.SCARD / FG.SREM /
FG.SISMEMBER through redis-py and redis-cli, /v1/sets/{key} through curl,
on the embedded store and on a real redis-server. Real time: TTLs of a few
hundred milliseconds, waited for by polling the server, never by a fixed
sleep standing in for an event."""

import json
import subprocess
import threading

import pytest

from conftest import metric_value, require_tool, until

try:
    import redis
except ImportError:  # FAIL, do not skip: the client is part of the contract
    redis = None

CONFIG = """\
redis: { timeout_ms: 2000 }
sets: { max_members: 3, max_ttl: 1h }
rules: {}
"""


def client(port):
    if redis is None:
        pytest.fail("the Python 'redis' module is missing: apt-get install -y python3-redis",
                    pytrace=False)
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


@pytest.fixture(params=["memory", "redis"])
def store(request, redis_server):
    """(extra serve args, the backing redis-server or None)."""
    if request.param == "memory":
        return [], None
    backend = redis_server()
    return ["--store", backend.url], backend


def test_resp_commands(start_server, store):
    args, backend = store
    server = start_server(CONFIG, extra_args=args)
    c = client(server.resp_port)
    assert c.execute_command("FG.SADD", "phone:+15550100", "req-1", 60_000) == 1
    assert c.execute_command("FG.SADD", "phone:+15550100", "req-2", 30_000) == 1
    assert c.execute_command("FG.SADD", "phone:+15550100", "req-1", 90_000) == 0  # refreshed
    # Earliest expiry first.
    assert c.execute_command("FG.SMEMBERS", "phone:+15550100") == [b"req-2", b"req-1"]
    with_ttl = c.execute_command("FG.SMEMBERS", "phone:+15550100", "WITHTTL")
    assert with_ttl[0::2] == [b"req-2", b"req-1"]
    assert 29_000 < with_ttl[1] <= 30_000 and 89_000 < with_ttl[3] <= 90_000
    assert c.execute_command("FG.SCARD", "phone:+15550100") == 2
    assert c.execute_command("FG.SISMEMBER", "phone:+15550100", "req-2") == 1
    assert c.execute_command("FG.SREM", "phone:+15550100", "req-2") == 1
    assert c.execute_command("FG.SREM", "phone:+15550100", "req-2") == 0
    assert c.execute_command("FG.SISMEMBER", "phone:+15550100", "req-2") == 0
    assert c.execute_command("FG.SCARD", "nobody") == 0
    assert c.execute_command("FG.SMEMBERS", "nobody") == []
    if backend is not None:
        r = backend.client()
        assert r.type("fg:set:{phone:+15550100}") == b"zset"
        assert 89_000 < r.pttl("fg:set:{phone:+15550100}") <= 90_000
        assert c.execute_command("FG.SREM", "phone:+15550100", "req-1") == 1
        assert r.exists("fg:set:{phone:+15550100}") == 0  # gone with its last member


def test_members_expire_on_their_own(start_server, store):
    args, backend = store
    server = start_server(CONFIG, extra_args=args)
    c = client(server.resp_port)
    # Seconds apart, so that both are live when first listed and the long
    # one is still there when the short one has gone, however slow the
    # machine.
    c.execute_command("FG.SADD", "s", "short", 2000)
    c.execute_command("FG.SADD", "s", "long", 6000)
    first = c.execute_command("FG.SMEMBERS", "s", "WITHTTL")
    assert first[0::2] == [b"short", b"long"]
    # The short member leaves first, and the long one is still there then.
    def short_gone():
        members = c.execute_command("FG.SMEMBERS", "s")
        return members if b"short" not in members else None

    assert until(short_gone) == [b"long"]
    until(lambda: c.execute_command("FG.SCARD", "s") == 0, 20)
    assert c.execute_command("FG.SMEMBERS", "s") == []
    if backend is not None:
        until(lambda: backend.client().exists("fg:set:{s}") == 0)


def test_the_cap_is_a_clear_error_and_changes_nothing(start_server, store):
    args, _ = store
    server = start_server(CONFIG, extra_args=args)
    c = client(server.resp_port)
    for m in ("a", "b", "c"):
        assert c.execute_command("FG.SADD", "capped", m, 60_000) == 1
    with pytest.raises(redis.ResponseError, match=r"set is full: 3 live members \(sets.max_members\)"):
        c.execute_command("FG.SADD", "capped", "d", 60_000)
    assert c.execute_command("FG.SMEMBERS", "capped") == [b"a", b"b", b"c"]
    assert c.execute_command("FG.SADD", "capped", "a", 70_000) == 0  # a refresh still fits
    # A member that expired makes room.
    c.execute_command("FG.SADD", "capped", "b", 200)
    until(lambda: c.execute_command("FG.SCARD", "capped") == 2)
    assert c.execute_command("FG.SADD", "capped", "d", 60_000) == 1


BAD_COMMANDS = [
    (["FG.SADD", "k"], "wrong number of arguments for 'fg.sadd'"),
    (["FG.SADD", "k", "m"], "wrong number of arguments"),
    (["FG.SADD", "k", "m", "1", "2"], "wrong number of arguments"),
    (["FG.SADD", "k", "m", "abc"], "ttl_ms must be an integer"),
    (["FG.SADD", "k", "m", "1.5"], "ttl_ms must be an integer"),
    (["FG.SADD", "k", "m", " 5"], "ttl_ms must be an integer"),
    (["FG.SADD", "k", "m", ""], "ttl_ms must be an integer"),
    (["FG.SADD", "k", "m", "99999999999999999999"], "ttl_ms must be an integer"),
    (["FG.SADD", "k", "m", "0"], "ttl_ms must be between 1 and 3600000"),
    (["FG.SADD", "k", "m", "-1"], "ttl_ms must be between"),
    (["FG.SADD", "k", "m", "3600001"], "sets.max_ttl"),
    (["FG.SADD", "k", "m", "9223372036854775807"], "ttl_ms must be between"),
    (["FG.SADD", "", "m", "100"], "key must not be empty"),
    (["FG.SADD", "k", "", "100"], "member must not be empty"),
    (["FG.SADD", "k" * 513, "m", "100"], "key is 513 bytes"),
    (["FG.SADD", "k", "m" * 513, "100"], "member is 513 bytes"),
    (["FG.SREM", "k"], "wrong number of arguments"),
    (["FG.SREM", "k", ""], "member must not be empty"),
    (["FG.SISMEMBER", "k", "m", "x"], "wrong number of arguments"),
    (["FG.SCARD"], "wrong number of arguments"),
    (["FG.SCARD", "k", "x"], "wrong number of arguments"),
    (["FG.SCARD", ""], "key must not be empty"),
    (["FG.SMEMBERS"], "wrong number of arguments"),
    (["FG.SMEMBERS", "k", "WITHSCORES"], "syntax error"),
    (["FG.SMEMBERS", "k", "WITHTTL", "x"], "syntax error"),
]


def test_bad_commands_get_clear_errors_and_change_nothing(start_server, store):
    args, backend = store
    server = start_server(CONFIG, extra_args=args)
    c = client(server.resp_port)
    c.execute_command("FG.SADD", "k", "kept", 60_000)
    for argv, message in BAD_COMMANDS:
        with pytest.raises(redis.ResponseError) as e:
            c.execute_command(*argv)
        assert message in str(e.value), (argv, str(e.value))
    assert c.execute_command("FG.SMEMBERS", "k") == [b"kept"]
    assert c.ping()
    if backend is not None:
        assert [k for k in backend.client().scan_iter("*")] == [b"fg:set:{k}"]


def test_redis_cli_and_binary_members(start_server, store):
    args, _ = store
    cli = require_tool("redis-cli", "redis-server")
    server = start_server(CONFIG, extra_args=args)
    run = lambda *a: subprocess.run([cli, "-p", str(server.resp_port), *a], capture_output=True,
                                    text=True, timeout=10).stdout.strip()
    assert run("FG.SADD", "device:7", "ua:curl", "60000") == "1"
    assert run("FG.SCARD", "device:7") == "1"
    assert run("FG.SMEMBERS", "device:7") == "ua:curl"
    c = client(server.resp_port)
    member = b"\x00\xff\r\n tricky"
    assert c.execute_command("FG.SADD", b"bin\x00key", member, 60_000) == 1
    assert c.execute_command("FG.SMEMBERS", b"bin\x00key") == [member]


def curl_json(curl, url, method="GET", data=None):
    cmd = [curl, "-s", "-i", "--max-time", "10", "-X", method, url]
    if data is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", data]
    raw = subprocess.run(cmd, capture_output=True, timeout=20).stdout
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body else None


def test_http_routes(start_server, store):
    args, backend = store
    curl = require_tool("curl", "curl")
    server = start_server(CONFIG, extra_args=args)
    base = f"http://127.0.0.1:{server.http_port}/v1/sets"
    status, body = curl_json(curl, base + "/user%2F42", "POST", '{"member":"tab-1","ttl_ms":60000}')
    assert status == 200, body
    assert body["key"] == "user/42" and body["member"] == "tab-1" and body["added"] is True
    assert body["ttl_ms"] == 60000
    status, body = curl_json(curl, base + "/user%2F42", "POST", '{"member":"tab-1","ttl_ms":5000}')
    assert (status, body["added"]) == (200, False)
    curl_json(curl, base + "/user%2F42", "POST", '{"ttl_ms":90000,"member":"tab-2"}')
    status, body = curl_json(curl, base + "/user%2F42")
    assert status == 200
    assert body["count"] == 2
    assert [m["member"] for m in body["members"]] == ["tab-1", "tab-2"]
    assert 0 < body["members"][0]["ttl_ms"] <= 5000
    assert body["members"][1]["expires_at_ms"] - body["members"][0]["expires_at_ms"] >= 84_000
    status, body = curl_json(curl, base + "/user%2F42?member=tab-2")
    assert (status, body["present"]) == (200, True)
    status, body = curl_json(curl, base + "/user%2F42?member=tab-2", "DELETE")
    assert (status, body["removed"]) == (200, True)
    status, body = curl_json(curl, base + "/user%2F42?member=tab-2", "DELETE")
    assert (status, body["removed"]) == (200, False)
    status, body = curl_json(curl, base + "/user%2F42?member=tab-2")
    assert (status, body["present"]) == (200, False)
    # The cap over HTTP: 409 with the reason.
    for m in ("x", "y"):
        assert curl_json(curl, base + "/user%2F42", "POST",
                         '{"member":"%s","ttl_ms":60000}' % m)[0] == 200
    status, body = curl_json(curl, base + "/user%2F42", "POST", '{"member":"z","ttl_ms":60000}')
    assert status == 409 and "set is full" in body["detail"]
    if backend is not None:
        assert backend.client().pttl("fg:set:{user/42}") > 0


BAD_HTTP = [
    ("POST", "/k", "", 400, "the request body is empty"),
    ("POST", "/k", "[]", 400, "must be a JSON object"),
    ("POST", "/k", '{"member":"m"}', 400, 'missing required field "ttl_ms"'),
    ("POST", "/k", '{"ttl_ms":5}', 400, 'missing required field "member"'),
    ("POST", "/k", '{"member":"m","ttl_ms":"5"}', 400, '"ttl_ms" must be an integer'),
    ("POST", "/k", '{"member":"m","ttl_ms":1.5}', 400, '"ttl_ms" must be an integer'),
    ("POST", "/k", '{"member":"m","ttl_ms":-1}', 400, "ttl_ms must be between"),
    ("POST", "/k", '{"member":"m","ttl_ms":0}', 400, "ttl_ms must be between"),
    ("POST", "/k", '{"member":"m","ttl_ms":99999999999999999999}', 400, "must be an integer"),
    ("POST", "/k", '{"member":"m","ttl_ms":18446744073709551615}', 400, "out of range"),
    ("POST", "/k", '{"member":7,"ttl_ms":5}', 400, '"member" must be a string'),
    ("POST", "/k", '{"member":"","ttl_ms":5}', 400, "member must not be empty"),
    ("POST", "/k", '{"member":"m","ttl_ms":5,"extra":1}', 400, 'unknown field "extra"'),
    ("POST", "/k", '{"member":"m","member":"n","ttl_ms":5}', 400, 'duplicate field "member"'),
    ("POST", "/k", '{"member":"m","ttl_ms":5', 400, "not valid JSON"),
    ("POST", "/k", '{"member":{"a":1},"ttl_ms":5}', 400, '"member" must be a string'),
    ("POST", "/k?member=m", '{"member":"m","ttl_ms":5}', 400, "POST takes a JSON body"),
    ("DELETE", "/k", None, 400, "DELETE needs the member"),
    ("GET", "/k?color=red", None, 400, 'unknown query parameter "color"'),
    ("GET", "/k?member=a&member=b", None, 400, "more than once"),
    ("GET", "/k?member=%zz", None, 400, "escape"),
    ("GET", "/k?member=", None, 400, "member must not be empty"),
    ("GET", "/" + "k" * 513, None, 400, "key is 513 bytes"),
    ("GET", "/%zz", None, 400, "percent-escape"),
    ("PUT", "/k", None, 405, "use POST to add a member"),
    ("GET", "/", None, 404, "no route"),
    ("GET", "/a/b", None, 404, "no route"),
]


def test_http_bad_requests_get_problem_details_and_change_nothing(start_server, store):
    args, backend = store
    curl = require_tool("curl", "curl")
    server = start_server(CONFIG, extra_args=args)
    base = f"http://127.0.0.1:{server.http_port}/v1/sets"
    for method, path, data, want, detail in BAD_HTTP:
        status, body = curl_json(curl, base + path, method, data)
        assert status == want, (method, path, data, body)
        assert detail in body["detail"], (method, path, data, body)
    assert curl_json(curl, base + "/k")[1]["count"] == 0
    if backend is not None:
        assert backend.client().dbsize() == 0


def test_metrics_count_set_operations(start_server, store):
    args, _ = store
    server = start_server(CONFIG, extra_args=args)
    c = client(server.resp_port)
    for m in ("a", "b", "c"):
        c.execute_command("FG.SADD", "m", m, 60_000)
    with pytest.raises(redis.ResponseError):
        c.execute_command("FG.SADD", "m", "d", 60_000)
    c.execute_command("FG.SREM", "m", "a")
    c.execute_command("FG.SCARD", "m")
    c.execute_command("FG.SMEMBERS", "m")
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/metrics", timeout=5) as f:
        text = f.read().decode()
    assert metric_value(text, "floodgate_set_operations_total", {"op": "add"}) == 3
    assert metric_value(text, "floodgate_set_operations_total", {"op": "remove"}) == 1
    assert metric_value(text, "floodgate_set_operations_total", {"op": "read"}) == 2
    assert metric_value(text, "floodgate_set_full_total") == 1
    assert metric_value(text, "floodgate_errors_total", {"kind": "set_full"}) == 1


def test_two_servers_on_one_redis_share_the_cap(start_server, redis_server):
    """Clients racing to add distinct members through two floodgate
    processes: the set never holds more than its cap."""
    backend = redis_server()
    config = "redis: { timeout_ms: 5000 }\nsets: { max_members: 25 }\nrules: {}\n"
    servers = [start_server(config, extra_args=["--store", backend.url]) for _ in range(2)]
    added, full, errors = [], [], []
    lock = threading.Lock()

    def worker(i):
        try:
            c = client(servers[i % 2].resp_port)
            for j in range(20):
                try:
                    n = c.execute_command("FG.SADD", "shared", f"{i}-{j}", 60_000)
                    with lock:
                        added.append(n)
                except redis.ResponseError as e:
                    assert "set is full" in str(e)
                    with lock:
                        full.append(1)
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert sum(added) == 25 and len(full) == 8 * 20 - 25
    assert backend.client().zcard("fg:set:{shared}") == 25
    assert client(servers[0].resp_port).execute_command("FG.SCARD", "shared") == 25
