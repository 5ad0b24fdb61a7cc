"""Redis keys of the wrong type under floodgate's names (someone's LPUSH,
SADD or HSET on a key where floodgate keeps a rule state, an expiring set or
an OTP state): decisions on them follow on_backend_error, the failures are
counted in /metrics and logged once per key per interval, other subjects are
unaffected, and `floodgate audit` reports the keys without touching them."""

import json
import subprocess
import urllib.request

from conftest import logfmt, metric_value

CONFIG = """\
redis: { timeout_ms: 2000, local_cache: false }
rules:
  api:    { algorithm: fixed_window, limits: [100/hour], on_backend_error: deny }
  open:   { algorithm: token_bucket, limits: [100/hour], on_backend_error: allow }
"""

WRONG_TYPE_RE = r'msg="redis key of the wrong type"'


def get(server, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}", timeout=5) as f:
        return f.status, f.read().decode()


def test_decisions_on_a_key_of_the_wrong_type_follow_on_backend_error_and_are_told(
        start_server, redis_server, resp_conn):
    backend = redis_server()
    r = backend.client()
    r.lpush("fg:{api:alice}", "someone's list")
    r.hset("fg:{open:alice}", "field", "value")
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    conn = resp_conn(server.resp_port)
    for _ in range(5):
        assert conn.command("FG.CHECK", "api", "alice")[0] == 0  # deny
        assert conn.command("FG.CHECK", "open", "alice")[0] == 1  # allow
    # Pipelined with other subjects (one script call on one server): they
    # are decided as usual.
    conn.send(b"".join(conn.encode("FG.CHECK", "api", k) for k in ("bob", "alice", "carol")))
    replies = [conn.read_reply() for _ in range(3)]
    assert [x[0] for x in replies] == [1, 0, 1]
    assert replies[0][2] == 99 and replies[2][2] == 99  # remaining: counted on Redis

    status, body = get(server, "/v1/check?rule=open&key=alice")
    assert status == 200 and json.loads(body)["fallback"] == "backend_error"

    _, metrics = get(server, "/metrics")
    assert metric_value(metrics, "floodgate_store_wrong_type_total") == 12
    assert metric_value(metrics, "floodgate_backend_errors_total") == 12
    # One line per key, not one per decision.
    line = server.wait_for(WRONG_TYPE_RE + r".*key=fg:\{api:alice\}")
    assert line is not None, server.stderr_text()
    fields = logfmt(line)
    assert fields["level"] == "warn"
    assert fields["found"] == "list" and fields["expected"] == "string"
    assert server.wait_for(WRONG_TYPE_RE + r".*key=fg:\{open:alice\}.*found=hash") is not None
    told = [x for x in server.stderr_text().splitlines() if "redis key of the wrong type" in x]
    assert len(told) == 2, told

    # The keys are someone's data: left as they were.
    assert r.type("fg:{api:alice}") == b"list" and r.lrange("fg:{api:alice}", 0, -1) == [
        b"someone's list"]
    assert r.type("fg:{open:alice}") == b"hash"
    # Once deleted, decisions are normal again.
    r.delete("fg:{api:alice}")
    assert conn.command("FG.CHECK", "api", "alice")[:3] == [1, 100, 99]


def test_sets_and_otp_refuse_a_key_of_the_wrong_type(start_server, redis_server, resp_conn):
    backend = redis_server()
    r = backend.client()
    r.set("fg:set:{phones}", "a string")
    server = start_server(CONFIG, extra_args=["--store", backend.url])
    conn = resp_conn(server.resp_port)
    reply = conn.command("FG.SADD", "phones", "+15550100", 60000)
    assert "holds a string, not a zset" in str(reply), reply
    assert r.get("fg:set:{phones}") == b"a string"
    _, metrics = get(server, "/metrics")
    assert metric_value(metrics, "floodgate_store_wrong_type_total") == 1
    assert server.wait_for(WRONG_TYPE_RE + r".*key=fg:set:\{phones\} found=string "
                           r"expected=zset") is not None


def audit(binary, *args):
    return subprocess.run([str(binary), "audit", *args], capture_output=True, text=True,
                          timeout=60)


def test_audit_reports_keys_of_the_wrong_type_and_leaves_them(floodgate_bin, redis_server):
    backend = redis_server()
    r = backend.client()
    node = f"127.0.0.1:{backend.port}"
    # Of the wrong type, with a TTL (so only the type is wrong) ...
    r.lpush("fg:{api:alice}", "x")
    r.pexpire("fg:{api:alice}", 600_000)
    r.sadd("fg:set:{phones}", "m")
    r.pexpire("fg:set:{phones}", 600_000)
    r.set("fg:otp:{+15550100}:codes", "x", px=600_000)
    # ... and without one: reported twice, and --fix gives it a TTL as ever.
    r.hset("fg:{alerts}", "f", "v")
    # Right: floodgate's types, with TTLs.
    r.set("fg:{api:bob}", "state", px=600_000)
    r.set("fg:cl:{bob}", "state", px=600_000)
    r.zadd("fg:set:{ok}", {"m": 1})
    r.pexpire("fg:set:{ok}", 600_000)
    r.zadd("fg:otp:{+15550100}:issues", {"e": 1})
    r.pexpire("fg:otp:{+15550100}:issues", 600_000)
    # Not a name floodgate uses: no type expected.
    r.lpush("fg:mine", "x")
    r.pexpire("fg:mine", 600_000)

    out = audit(floodgate_bin, "--redis", backend.url)
    assert out.returncode == 1, out.stderr
    assert sorted(out.stdout.splitlines()) == sorted([
        f"wrong-type {node} found=list expected=string fg:{{api:alice}}",
        f"wrong-type {node} found=set expected=zset fg:set:{{phones}}",
        f"wrong-type {node} found=string expected=zset fg:otp:{{+15550100}}:codes",
        f"wrong-type {node} found=hash expected=stream fg:{{alerts}}",
        f"no-ttl {node} fg:{{alerts}}",
    ])
    assert "scanned 9 keys" in out.stderr, out.stderr
    assert "1 without a TTL, 4 of the wrong type" in out.stderr, out.stderr

    out = audit(floodgate_bin, "--redis", backend.url, "--fix", "--ttl", "120")
    assert out.returncode == 1, out.stderr  # the wrong types remain
    assert "1 given one (120 s)" in out.stderr and "4 of the wrong type" in out.stderr
    assert 0 < r.pttl("fg:{alerts}") <= 120_000
    assert r.type("fg:{api:alice}") == b"list" and r.type("fg:{alerts}") == b"hash"
    assert r.exists("fg:set:{phones}", "fg:otp:{+15550100}:codes") == 2

    for key in ("fg:{api:alice}", "fg:set:{phones}", "fg:otp:{+15550100}:codes", "fg:{alerts}"):
        r.delete(key)
    out = audit(floodgate_bin, "--redis", backend.url)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 without a TTL, 0 of the wrong type" in out.stderr
