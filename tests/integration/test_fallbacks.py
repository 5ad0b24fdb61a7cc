"""Fallback decisions on every front of the real binary: a full embedded
store (engine.max_entries, engine.max_memory) answers a new subject by the
rule's on_store_full, and a Redis store whose server is down by its
on_backend_error. Either is a decision, never an error, and says so: HTTP's
Floodgate-Fallback field and "fallback" member with null figures, FG.CHECK's
-1 figures and VERBOSE reason (redis-py), CL.THROTTLE's -1, the gRPC
floodgate-fallback header (Node's @grpc/grpc-js), and a metric by reason."""

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import NODE_GRPC_DIR, metric_value

try:
    import redis
except ImportError:  # FAIL, do not skip: the client is part of the contract
    redis = None

FULL = """\
engine: { max_entries: 4, shards: 1 }
rules:
  closed: { algorithm: fixed_window, limits: [5/hour, 50/day] }
  open:   { algorithm: gcra, limits: [10/second], on_store_full: allow }
"""


def client(port):
    if redis is None:
        pytest.fail("the Python 'redis' module is missing: apt-get install -y python3-redis",
                    pytrace=False)
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def http(server, method, path, body=None):
    """(status, header fields as a dict of lower-case names, body bytes)."""
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=10) as f:
            return f.status, {k.lower(): v for k, v in f.headers.items()}, f.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def metrics(server):
    return http(server, "GET", "/metrics")[2].decode()


def fill(c, n):
    for i in range(n):
        reply = c.execute_command("FG.CHECK", "closed", f"held:{i}", "VERBOSE")
        assert reply[:3] == [1, 5, 4] and reply[5] == b"", reply


def test_a_full_store_denies_a_new_subject_by_default_marked_on_http_and_resp(start_server):
    server = start_server(FULL)
    c = client(server.resp_port)
    fill(c, 4)

    status, fields, body = http(server, "GET", "/v1/check?rule=closed&key=newcomer")
    assert status == 429, body
    assert fields["floodgate-fallback"] == "store_full"
    assert "ratelimit" not in fields  # the subject's state is not known
    assert fields["ratelimit-policy"] == '"closed:0";q=5;w=3600, "closed:1";q=50;w=86400'
    assert fields["retry-after"] == "1"
    decision = json.loads(body)
    assert decision["allowed"] is False and decision["fallback"] == "store_full"
    assert decision["limit"] == 5 and decision["retry_after_ms"] == 1000
    assert decision["remaining"] is None and decision["reset_after_ms"] is None
    figures = [(lim["limit"], lim["remaining"], lim["reset_after_ms"])
               for lim in decision["limits"]]
    assert figures == [(5, None, None), (50, None, None)]

    # FG.CHECK: five integers, the unknown ones -1; VERBOSE adds the reason.
    assert c.execute_command("FG.CHECK", "closed", "newcomer") == [0, 5, -1, 1000, -1]
    assert c.execute_command("FG.CHECK", "closed", "newcomer", "VERBOSE") == \
        [0, 5, -1, 1000, -1, b"store_full"]
    # A known subject is decided as usual: a real decision, an empty reason.
    reply = c.execute_command("FG.CHECK", "closed", "held:0", "VERBOSE", "COST", "2")
    assert reply[:4] == [1, 5, 2, 0] and reply[4] > 0 and reply[5] == b""
    status, fields, body = http(server, "GET", "/v1/check?rule=closed&key=held:1")
    assert status == 200 and "floodgate-fallback" not in fields and "ratelimit" in fields
    assert "fallback" not in json.loads(body)
    # A peek keeps nothing, so needs no room: a real answer for a new subject.
    reply = c.execute_command("FG.CHECK", "closed", "newcomer", "COST", "0", "VERBOSE")
    assert reply[:4] == [1, 5, 5, 0] and reply[5] == b"", reply
    # CL.THROTTLE has no rule: a new key at a full store is limited, figures unknown.
    assert c.execute_command("CL.THROTTLE", "cell", 15, 30, 60) == [1, 16, -1, 1, -1]

    text = metrics(server)
    assert metric_value(text, "floodgate_fallback_decisions_total",
                        {"reason": "store_full"}) == 4
    assert metric_value(text, "floodgate_fallback_decisions_total",
                        {"reason": "backend_error"}) == 0
    assert metric_value(text, "floodgate_store_rejected_full_total") == 4
    assert metric_value(text, "floodgate_store_entries") == 4


def test_on_store_full_allow_admits_a_new_subject_marked(start_server):
    server = start_server(FULL)
    fill(client(server.resp_port), 4)
    status, fields, body = http(server, "POST", "/v1/check",
                                {"rule": "open", "key": "newcomer", "cost": 3})
    assert status == 200, body
    assert fields["floodgate-fallback"] == "store_full"
    assert "retry-after" not in fields and "ratelimit" not in fields
    decision = json.loads(body)
    assert decision["allowed"] is True and decision["fallback"] == "store_full"
    assert decision["remaining"] is None and decision["retry_after_ms"] == 0
    assert client(server.resp_port).execute_command("FG.CHECK", "open", "x", "VERBOSE") == \
        [1, 10, -1, 0, -1, b"store_full"]
    rules = json.loads(http(server, "GET", "/v1/rules")[2])["rules"]
    assert rules["open"]["on_store_full"] == "allow"
    assert rules["closed"]["on_store_full"] == "deny"


def test_max_memory_bounds_bytes_so_long_keys_meet_it_first(start_server):
    server = start_server("""\
engine: { max_memory: 16kb, shards: 1 }
rules:
  api: { algorithm: gcra, limits: [10/second] }
""")
    c = client(server.resp_port)
    # 512-byte keys: a 544-byte allocation each; 16 KiB holds fewer than 30.
    marks = []
    for i in range(40):
        key = f"{i:03d}".ljust(512, "k")
        marks.append(c.execute_command("FG.CHECK", "api", key, "VERBOSE")[5])
    real = marks.count(b"")
    assert 20 <= real < 30, marks
    assert marks[real:] == [b"store_full"] * (40 - real), marks
    text = metrics(server)
    assert metric_value(text, "floodgate_store_entries") == real
    assert metric_value(text, "floodgate_store_bytes") <= 16384
    assert metric_value(text, "floodgate_fallback_decisions_total",
                        {"reason": "store_full"}) == 40 - real


def test_a_redis_store_that_is_down_answers_by_on_backend_error_marked(start_server,
                                                                         redis_server):
    backend = redis_server()
    server = start_server("""\
rules:
  open:   { algorithm: fixed_window, limits: [5/hour] }
  closed: { algorithm: fixed_window, limits: [7/hour], on_backend_error: deny }
redis: { timeout_ms: 2000 }  # the first answer must be Redis's, however slow the machine
""", extra_args=["--store", backend.url])
    c = client(server.resp_port)
    reply = c.execute_command("FG.CHECK", "open", "gina", "VERBOSE")
    assert reply[:3] == [1, 5, 4] and reply[5] == b"", reply
    backend.stop()

    assert c.execute_command("FG.CHECK", "open", "gina", "VERBOSE") == \
        [1, 5, -1, 0, -1, b"backend_error"]
    assert c.execute_command("FG.CHECK", "closed", "gina", "VERBOSE") == \
        [0, 7, -1, 1000, -1, b"backend_error"]
    assert c.execute_command("FG.CHECK", "closed", "gina") == [0, 7, -1, 1000, -1]
    status, fields, body = http(server, "GET", "/v1/check?rule=closed&key=gina")
    assert status == 429, body
    assert fields["floodgate-fallback"] == "backend_error"
    assert fields["retry-after"] == "1" and "ratelimit" not in fields
    decision = json.loads(body)
    assert decision["fallback"] == "backend_error"
    assert decision["remaining"] is None and decision["reset_after_ms"] is None
    status, fields, body = http(server, "GET", "/v1/check?rule=open&key=gina")
    assert status == 200 and fields["floodgate-fallback"] == "backend_error"

    text = metrics(server)
    assert metric_value(text, "floodgate_fallback_decisions_total",
                        {"reason": "backend_error"}) == 5
    assert metric_value(text, "floodgate_backend_errors_total") == 5

    backend.start()  # same port: real decisions again, unmarked
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        reply = c.execute_command("FG.CHECK", "open", "gina", "VERBOSE")
        if reply[5] == b"":
            break
        time.sleep(0.05)
    assert reply[5] == b"" and reply[2] >= 0, reply


def grpc_call(node, port, request):
    out = subprocess.run([node, "call.js", str(port), json.dumps(request)], cwd=NODE_GRPC_DIR,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"call.js failed:\n{out.stdout}\n{out.stderr}"
    return json.loads(out.stdout)


def test_grpc_names_a_store_full_fallback_in_a_response_header(start_server, tmp_dir,
                                                                node_ready):
    conf = tmp_dir / "ratelimit"
    conf.mkdir()
    (conf / "api.yaml").write_text("""\
domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
""")
    server = start_server(
        f"engine: {{ max_entries: 1 }}\n"
        f"envoy_ratelimit: {{ files: [{conf}], response_headers: true }}\n",
        grpc="127.0.0.1:0")

    def ask(user):
        return grpc_call(node_ready, server.grpc_port, {
            "domain": "api", "descriptors": [{"entries": [{"key": "user", "value": user}]}]})

    first = ask("alice")  # takes the store's only entry
    assert first["overall_code"] == "OK"
    headers = {h["key"]: h["value"] for h in first["response_headers_to_add"]}
    assert headers["RateLimit-Remaining"] == "9" and "floodgate-fallback" not in headers

    full = ask("bob")
    assert full["overall_code"] == "OVER_LIMIT"  # envoy_ratelimit.on_store_full: deny
    headers = {h["key"]: h["value"] for h in full["response_headers_to_add"]}
    assert headers == {"floodgate-fallback": "store_full"}  # no made-up RateLimit-*
    status = full["statuses"][0]
    assert status["current_limit"]["requests_per_unit"] == 10
    assert status["limit_remaining"] == 0 and status["duration_until_reset"] is None
    assert metric_value(metrics(server), "floodgate_fallback_decisions_total",
                        {"reason": "store_full"}) == 1
