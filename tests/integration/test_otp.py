"""One-time passwords end to end: FG.OTP.ISSUE / FG.OTP.VERIFY through
redis-py and redis-cli, /v1/otp/issue and /v1/otp/verify through curl, on
the embedded store and on a real redis-server; the secret's variable; the
delivery hook posting to a real HTTP receiver process; check-config."""

import json
import os
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import metric_value, require_tool

try:
    import redis
except ImportError:  # FAIL, do not skip: the client is part of the contract
    redis = None

HERE = Path(__file__).resolve().parent
SECRET = "integration-secret-0123456789"
ENV = {"FG_OTP_SECRET": SECRET}
CONFIG = """\
redis: { timeout_ms: 2000 }
otp: { digits: 6, ttl: 5m, issue_limit: 3/5m, verify_limit: 5/15m, max_live_codes: 3 }
rules: {}
"""


def client(port):
    if redis is None:
        pytest.fail("the Python 'redis' module is missing: apt-get install -y python3-redis",
                    pytrace=False)
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, decode_responses=True)


@pytest.fixture(params=["memory", "redis"])
def store(request, redis_server):
    if request.param == "memory":
        return [], None
    backend = redis_server()
    return ["--store", backend.url], backend


def wrong(code: str) -> str:
    return ("1" if code[0] == "0" else "0") + code[1:]


def issue(c, subject="+15550100") -> str:
    code = c.execute_command("FG.OTP.ISSUE", subject)
    assert re.fullmatch(r"[0-9]{6}", code), code
    return code


def metrics(server) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/metrics", timeout=5) as f:
        return f.read().decode()


def test_issue_wrong_right_replay(start_server, store):
    args, backend = store
    server = start_server(CONFIG, extra_args=args, env=ENV)
    c = client(server.resp_port)
    code = issue(c)
    assert c.execute_command("FG.OTP.VERIFY", "+15550100", wrong(code)) == 0
    assert c.execute_command("FG.OTP.VERIFY", "+15550199", code) == 0  # someone else's
    assert c.execute_command("FG.OTP.VERIFY", "+15550100", code) == 1
    assert c.execute_command("FG.OTP.VERIFY", "+15550100", code) == 0  # replay
    text = metrics(server)
    assert metric_value(text, "floodgate_otp_issued_total") == 1
    assert metric_value(text, "floodgate_otp_verifications_total", {"result": "valid"}) == 1
    assert metric_value(text, "floodgate_otp_verifications_total", {"result": "invalid"}) == 3
    if backend is not None:
        r = backend.client()
        keys = sorted(k.decode() for k in r.scan_iter("*"))
        # The success removed the subject's codes and attempts; the replay
        # was an attempt of its own; the issue log stays for its window.
        assert keys == ["fg:otp:{+15550100}:attempts", "fg:otp:{+15550100}:issues",
                        "fg:otp:{+15550199}:attempts"], keys
        assert all(r.pttl(k) > 0 for k in keys)


def test_issue_limit_says_when_to_retry(start_server, store):
    args, _ = store
    server = start_server(CONFIG, extra_args=args, env=ENV)
    c = client(server.resp_port)
    for _ in range(3):
        issue(c)
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command("FG.OTP.ISSUE", "+15550100")
    m = re.search(r"OTP issue limit \(3/5m\) is reached for this subject; retry after (\d+) ms",
                  str(e.value))
    assert m, str(e.value)
    assert 290_000 < int(m.group(1)) <= 300_000
    issue(c, "+15550101")  # per subject
    assert metric_value(metrics(server), "floodgate_otp_issue_limited_total") == 1


def test_brute_force_is_blocked_after_the_limit(start_server, store):
    args, _ = store
    server = start_server(CONFIG, extra_args=args, env=ENV)
    c = client(server.resp_port)
    code = issue(c)
    for _ in range(5):
        assert c.execute_command("FG.OTP.VERIFY", "+15550100", wrong(code)) == 0
    # Even the right code: refused before any comparison.
    with pytest.raises(redis.ResponseError, match=r"OTP verify limit \(5/15m\).*retry after \d+ ms"):
        c.execute_command("FG.OTP.VERIFY", "+15550100", code)
    assert metric_value(metrics(server), "floodgate_otp_verifications_total",
                        {"result": "limited"}) == 1


def test_the_cap_on_live_codes(start_server, store):
    args, _ = store
    config = CONFIG.replace("max_live_codes: 3", "max_live_codes: 2")
    server = start_server(config, extra_args=args, env=ENV)
    c = client(server.resp_port)
    first, second, third = issue(c), issue(c), issue(c)
    if first not in (second, third):
        assert c.execute_command("FG.OTP.VERIFY", "+15550100", first) == 0  # dropped
    assert c.execute_command("FG.OTP.VERIFY", "+15550100", third) == 1
    if second != third:
        assert c.execute_command("FG.OTP.VERIFY", "+15550100", second) == 0  # invalidated


def test_two_concurrent_verifies_of_one_code_exactly_one_succeeds(start_server, store):
    args, backend = store
    config = CONFIG.replace("issue_limit: 3/5m", "issue_limit: 100/5m")
    # On Redis: two floodgate servers sharing it, one client on each.
    servers = [start_server(config, extra_args=args, env=ENV)]
    if backend is not None:
        servers.append(start_server(config, extra_args=args, env=ENV))
    for round_ in range(20):
        subject = f"race-{round_}"
        code = issue(client(servers[0].resp_port), subject)
        clients = [client(servers[i % len(servers)].resp_port) for i in range(2)]
        for cl in clients:
            cl.ping()  # connected before the race
        barrier = threading.Barrier(2)
        answers, errors = [], []

        def verify(cl):
            try:
                barrier.wait(5)
                answers.append(cl.execute_command("FG.OTP.VERIFY", subject, code))
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=verify, args=(cl,)) for cl in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert errors == []
        assert sorted(answers) == [0, 1], (round_, answers)


BAD = [
    (["FG.OTP.ISSUE"], "wrong number of arguments for 'fg.otp.issue'"),
    (["FG.OTP.ISSUE", "a", "b"], "wrong number of arguments"),
    (["FG.OTP.ISSUE", ""], "subject must be 1 to 512 bytes"),
    (["FG.OTP.ISSUE", "+1 555 0100"], "without spaces or control characters"),
    (["FG.OTP.ISSUE", "a\x00b"], "without spaces or control characters"),
    (["FG.OTP.ISSUE", "x" * 513], "got 513 bytes"),
    (["FG.OTP.ISSUE", b"\xff\xfe"], "UTF-8"),
    (["FG.OTP.VERIFY", "+15550100"], "wrong number of arguments"),
    (["FG.OTP.VERIFY", "+15550100", "123456", "x"], "wrong number of arguments"),
    (["FG.OTP.VERIFY", "+15550100", "12345"], "code must be 6 digits"),
    (["FG.OTP.VERIFY", "+15550100", "1234567"], "code must be 6 digits"),
    (["FG.OTP.VERIFY", "+15550100", "12a456"], "code must be 6 digits"),
    (["FG.OTP.VERIFY", "+15550100", ""], "code must be 6 digits"),
    (["FG.OTP.VERIFY", "", "123456"], "subject must be"),
]


def test_bad_commands_get_clear_errors_and_change_nothing(start_server, store):
    args, backend = store
    server = start_server(CONFIG, extra_args=args, env=ENV)
    c = client(server.resp_port)
    raw = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=10)
    code = issue(c)
    for argv, message in BAD:
        with pytest.raises(redis.ResponseError) as e:
            raw.execute_command(*argv)
        assert message in str(e.value), (argv, str(e.value))
    # No bad command issued a code or used an attempt: 4 wrong guesses, then
    # the right one, still pass.
    for _ in range(4):
        assert c.execute_command("FG.OTP.VERIFY", "+15550100", wrong(code)) == 0
    assert c.execute_command("FG.OTP.VERIFY", "+15550100", code) == 1
    assert metric_value(metrics(server), "floodgate_otp_issued_total") == 1


def test_redis_cli(start_server, store):
    args, _ = store
    cli = require_tool("redis-cli", "redis-server")
    server = start_server(CONFIG, extra_args=args, env=ENV)
    run = lambda *a: subprocess.run([cli, "-p", str(server.resp_port), *a], capture_output=True,
                                    text=True, timeout=10).stdout.strip()
    code = run("FG.OTP.ISSUE", "ana@example.com")
    assert re.fullmatch(r"[0-9]{6}", code), code
    assert run("FG.OTP.VERIFY", "ana@example.com", code) == "1"
    assert run("FG.OTP.VERIFY", "ana@example.com", code) == "0"


def http(curl, port, path, body=None, method="POST"):
    cmd = [curl, "-s", "-i", "--max-time", "10", "-X", method,
           f"http://127.0.0.1:{port}{path}"]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", body]
    raw = subprocess.run(cmd, capture_output=True, timeout=20).stdout
    head, _, payload = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(payload) if payload else None


def test_http_issue_verify_and_limits(start_server, store):
    args, _ = store
    curl = require_tool("curl", "curl")
    server = start_server(CONFIG, extra_args=args, env=ENV)
    port = server.http_port
    status, _, body = http(curl, port, "/v1/otp/issue", '{"subject":"+15550100"}')
    assert status == 200, body
    assert body["subject"] == "+15550100" and body["expires_in_ms"] == 300000
    code = body["code"]
    assert re.fullmatch(r"[0-9]{6}", code)
    v = lambda c: http(curl, port, "/v1/otp/verify", json.dumps({"subject": "+15550100", "code": c}))
    assert v(wrong(code))[0:3:2] == (200, {"subject": "+15550100", "valid": False})
    assert v(code)[0:3:2] == (200, {"subject": "+15550100", "valid": True})
    assert v(code)[2]["valid"] is False  # replay
    for _ in range(4):  # the success cleared the count: the replay and 4 more fail
        v(wrong(code))
    status, headers, body = v(code)
    assert status == 429, body
    assert 890 <= int(headers["retry-after"]) <= 900
    assert "OTP verify limit (5/15m)" in body["detail"]
    for _ in range(2):
        assert http(curl, port, "/v1/otp/issue", '{"subject":"+15550100"}')[0] == 200
    status, headers, body = http(curl, port, "/v1/otp/issue", '{"subject":"+15550100"}')
    assert status == 429 and 290 <= int(headers["retry-after"]) <= 300, body


BAD_HTTP = [
    ("/v1/otp/issue", "", 400, "the request body is empty"),
    ("/v1/otp/issue", "{}", 400, 'missing required field "subject"'),
    ("/v1/otp/issue", '{"subject":5}', 400, '"subject" must be a string'),
    ("/v1/otp/issue", '{"subject":"+1 555"}', 400, "without spaces"),
    ("/v1/otp/issue", '{"subject":"a","code":"1"}', 400, 'unknown field "code"'),
    ("/v1/otp/verify", '{"subject":"a"}', 400, 'missing required field "code"'),
    ("/v1/otp/verify", '{"subject":"a","code":123456}', 400, '"code" must be a string'),
    ("/v1/otp/verify", '{"subject":"a","code":"123"}', 400, "code must be 6 digits"),
    ("/v1/otp/verify", '{"subject":"a","code":"123456"', 400, "not valid JSON"),
    ("/v1/otp/verify", "[1]", 400, "must be a JSON object"),
]


def test_http_bad_requests(start_server, store):
    args, backend = store
    curl = require_tool("curl", "curl")
    server = start_server(CONFIG, extra_args=args, env=ENV)
    for path, body, want, detail in BAD_HTTP:
        status, _, answer = http(curl, server.http_port, path, body)
        assert status == want, (path, body, answer)
        assert detail in answer["detail"], (path, body, answer)
    status, headers, _ = http(curl, server.http_port, "/v1/otp/issue", method="GET")
    assert status == 405 and headers["allow"] == "POST"
    if backend is not None:
        assert backend.client().dbsize() == 0


def test_otp_is_not_found_without_an_otp_section(start_server):
    server = start_server("rules: { api: { algorithm: fixed_window, limits: [1/s] } }\n")
    c = client(server.resp_port)
    with pytest.raises(redis.ResponseError, match="OTP is not configured"):
        c.execute_command("FG.OTP.ISSUE", "+15550100")
    curl = require_tool("curl", "curl")
    assert http(curl, server.http_port, "/v1/otp/issue", '{"subject":"a"}')[0] == 404


def test_serve_refuses_otp_without_a_secret(start_server):
    server = start_server(CONFIG, env={"FG_OTP_SECRET": ""}, wait_listening=False)
    assert server.wait_exit(10) == 1
    assert "FG_OTP_SECRET (otp.secret_env) is not set or empty" in server.stderr_text()
    server = start_server(CONFIG, env={"FG_OTP_SECRET": "tooshort"}, wait_listening=False)
    assert server.wait_exit(10) == 1
    text = server.stderr_text()
    assert "use at least 16 random bytes" in text and "tooshort" not in text


def test_check_config_validates_the_otp_section(floodgate_bin, tmp_dir):
    bad = tmp_dir / "bad.yaml"
    bad.write_text("rules: {}\notp:\n  digits: 6\n  ttl: 5 minutes\n")
    out = subprocess.run([str(floodgate_bin), "check-config", str(bad)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 1
    assert f"{bad}:4:8: 'otp.ttl' must be a number and a unit" in out.stderr + out.stdout
    good = tmp_dir / "good.yaml"
    good.write_text(CONFIG)
    out = subprocess.run([str(floodgate_bin), "check-config", str(good)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert "otp: digits=6, ttl=300000ms, issue_limit=3/5m, verify_limit=5/15m" in out.stdout


def delivery_config(port, extra="", timeout_ms=1000):
    return CONFIG.replace(
        "max_live_codes: 3 }",
        "max_live_codes: 3,\n      delivery: { url: 'http://127.0.0.1:%d/sms', timeout_ms: %d%s } }"
        % (port, timeout_ms, extra))


def test_delivery_posts_the_code_to_the_gateway(start_server, store, receiver):
    args, _ = store
    gateway = receiver()
    server = start_server(delivery_config(gateway.port, ", auth_header_env: SMS_AUTH"),
                          extra_args=args, env={**ENV, "SMS_AUTH": "Bearer gw-token"})
    c = client(server.resp_port)
    assert c.execute_command("FG.OTP.ISSUE", "+15550100") == "QUEUED"
    record = gateway.wait_for(1)[0]
    assert record["path"] == "/sms"
    assert record["headers"]["Content-Type"] == "application/json"
    assert record["headers"]["Authorization"] == "Bearer gw-token"
    sent = json.loads(record["body"])
    assert sent["subject"] == "+15550100" and sent["expires_in_ms"] == 300000
    assert re.fullmatch(r"[0-9]{6}", sent["code"])
    assert c.execute_command("FG.OTP.VERIFY", "+15550100", sent["code"]) == 1
    curl = require_tool("curl", "curl")
    status, _, body = http(curl, server.http_port, "/v1/otp/issue", '{"subject":"ana@example.com"}')
    assert status == 202 and body == {"subject": "ana@example.com", "delivery": "queued",
                                      "expires_in_ms": 300000}
    assert json.loads(gateway.wait_for(2)[1]["body"])["subject"] == "ana@example.com"
    deadline = time.monotonic() + 10
    while metric_value(metrics(server), "floodgate_otp_deliveries_total", {"result": "sent"}) != 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert sent["code"] not in server.stderr_text()  # nothing logged a code


def test_delivery_failures_are_counted_and_the_queue_is_bounded(start_server, receiver):
    broken = receiver("--status", "500")
    server = start_server(delivery_config(broken.port), env=ENV)
    c = client(server.resp_port)
    assert c.execute_command("FG.OTP.ISSUE", "+15550100") == "QUEUED"
    broken.wait_for(1)
    deadline = time.monotonic() + 10
    while metric_value(metrics(server), "floodgate_otp_deliveries_total", {"result": "failed"}) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert server.wait_for(r"msg=\"delivery failed\".*HTTP status 500", 5) is not None

    silent = receiver("--silent")
    # The worker waits on the silent gateway for 5 s: the second issue comes
    # well within that however slow the machine.
    server = start_server(delivery_config(silent.port, ", queue_size: 1", timeout_ms=5000),
                          env=ENV)
    c = client(server.resp_port)
    assert c.execute_command("FG.OTP.ISSUE", "+15550100") == "QUEUED"
    silent.wait_for(1)  # the worker is now waiting on the silent gateway
    with pytest.raises(redis.ResponseError, match=r"delivery queue is full: 1 codes"):
        c.execute_command("FG.OTP.ISSUE", "+15550101")
    text = metrics(server)
    assert metric_value(text, "floodgate_otp_deliveries_total", {"result": "dropped"}) == 1
    assert metric_value(text, "floodgate_otp_issued_total") == 1


def test_the_curl_demo_runs(floodgate_bin):
    """examples/otp/demo.sh: issue, wrong code, right code, replay, the
    issue limit, an expiring set."""
    require_tool("curl", "curl")
    demo = HERE.parent.parent / "examples" / "otp" / "demo.sh"
    out = subprocess.run([str(demo)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "FLOODGATE_BIN": str(Path(floodgate_bin).resolve())})
    assert out.returncode == 0, out.stderr
    verdicts = re.findall(r'"valid":(true|false)', out.stdout)
    assert verdicts == ["false", "true", "false"], out.stdout
    assert "HTTP/1.1 429 Too Many Requests" in out.stdout
    assert re.search(r'"count":2,.*"count":1,', out.stdout, re.S), out.stdout
