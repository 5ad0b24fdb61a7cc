"""Process lifecycle: SIGHUP reload, clean shutdown, the connection limit,
refusing bad configs and busy ports."""

import re
import subprocess
import signal
import socket
import time

import pytest

from conftest import (SOURCE_DIR, RespConn, RespError, http_get, metric_value,
                      parse_http_response)

CONFIG_A = """\
rules:
  keep:    { algorithm: sliding_log, limits: [10/hour] }
  doomed:  { algorithm: sliding_log, limits: [10/hour] }
"""

CONFIG_B = """\
rules:
  keep:    { algorithm: sliding_log, limits: [10/hour] }
  fresh:   { algorithm: token_bucket, limits: [3/hour] }
"""

RELOADED = re.compile(r'level=info msg="config reloaded"')
REFUSED = re.compile(r'level=error msg="reload refused; the previous config keeps serving"')


def check(conn, rule, key, *extra):
    r = conn.command("FG.CHECK", rule, key, *extra)
    assert not isinstance(r, RespError), r
    return r


def test_sighup_reload_valid(start_server, resp_conn, curl):
    server = start_server(CONFIG_A)
    c = resp_conn(server.resp_port)
    for i in range(3):
        assert check(c, "keep", "k")[:3] == [1, 10, 9 - i]
    check(c, "doomed", "k")
    assert "unknown rule 'fresh'" in str(c.command("FG.CHECK", "fresh", "k"))

    mark = server.reload(CONFIG_B)
    line = server.wait_for(RELOADED, timeout=5, start=mark)
    assert line is not None, f"no 'config reloaded' log line:\n{server.stderr_text()}"
    # The new rule is usable at once, on an existing connection too.
    assert check(c, "fresh", "k")[:3] == [1, 3, 2]
    # The unchanged rule kept its count.
    assert check(c, "keep", "k")[:3] == [1, 10, 6]
    # The removed rule is gone.
    assert "unknown rule 'doomed'" in str(c.command("FG.CHECK", "doomed", "k"))
    rules = curl(f"http://127.0.0.1:{server.http_port}/v1/rules").json()["rules"]
    assert set(rules) == {"keep", "fresh"}, rules
    # HTTP sees the same state.
    r = curl(f"http://127.0.0.1:{server.http_port}/v1/check?rule=fresh&key=k")
    assert r.status == 200 and r.json()["remaining"] == 1, r


def test_sighup_reload_invalid_keeps_old_config(start_server, resp_conn):
    server = start_server(CONFIG_A)
    c = resp_conn(server.resp_port)
    assert check(c, "keep", "k")[:3] == [1, 10, 9]
    for bad in ("rules:\n  keep: { limits: [10/hour\n",        # YAML syntax
                "rules:\n  keep: { algorithm: leaky, limits: [1/s] }\n",  # bad rule
                "rules:\n  keep: { limits: [0/minute] }\n"):  # zero count
        mark = server.reload(bad)
        line = server.wait_for(REFUSED, timeout=5, start=mark)
        assert line is not None, f"no 'reload refused' log line for {bad!r}:\n" \
                                 f"{server.stderr_text()}"
        assert server.proc.poll() is None, "floodgate exited on a bad reload"
        assert check(c, "keep", "k")[0] == 1
        assert check(c, "doomed", "k")[0] == 1
    # 1 + 3 checks so far; the counts survived the refused reloads.
    assert check(c, "keep", "k")[:3] == [1, 10, 5]
    # A valid file afterwards is taken.
    mark = server.reload(CONFIG_B)
    assert server.wait_for(RELOADED, timeout=5, start=mark) is not None
    assert check(c, "fresh", "k")[:3] == [1, 3, 2]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_clean_shutdown_with_open_connections(start_server, resp_conn, sig):
    server = start_server(CONFIG_A)
    idle = resp_conn(server.resp_port)
    assert idle.command("PING") == "PONG"
    http = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
    http.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    assert http.recv(4096).startswith(b"HTTP/1.1 200")
    # A half-sent command must not hold the shutdown up either.
    half = resp_conn(server.resp_port)
    half.send(b"*3\r\n$8\r\nFG.CHECK\r\n")
    time.sleep(0.1)
    start = time.monotonic()
    assert server.stop(sig) == 0
    assert time.monotonic() - start < 5
    assert server.wait_for(r"msg=\"?shutting down", timeout=1) is not None, server.stderr_text()
    http.close()


def test_max_connections(start_server, resp_conn):
    # One loop: eviction picks the longest-idle connection of the loop that
    # accepted (docs/operations.md), so with one loop the order is exact.
    server = start_server(CONFIG_A + "server: { max_connections: 2 }\n", threads=1)
    a = resp_conn(server.resp_port)
    b = resp_conn(server.resp_port)
    assert a.command("PING") == "PONG"
    assert b.command("PING") == "PONG"
    # At the limit a new client evicts the longest-idle connection (a) and
    # is served; b, active more recently, is untouched. (A connection is
    # evictable once it has been quiet for 250 ms.)
    time.sleep(0.3)
    c = resp_conn(server.resp_port)
    assert c.command("PING") == "PONG"
    assert a.read_until_closed() == b""
    assert b.command("PING") == "PONG"
    # With every connection in the middle of a request, none is idle: a new
    # client is refused, RESP with redis-server's words.
    b.send(b"*1\r\n$4\r\nPI")
    c.send(b"*1\r\n$4\r\nPI")
    time.sleep(0.2)
    d = resp_conn(server.resp_port)
    rest = d.read_until_closed()
    assert rest == b"-ERR max number of clients reached\r\n", rest
    # The limit is across both fronts: HTTP is refused with a 503 problem.
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as h:
        h.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        raw = b""
        h.settimeout(5)
        try:  # the server closes at once: our unread request may turn the FIN into a RST
            while chunk := h.recv(65536):
                raw += chunk
        except ConnectionResetError:
            pass
        resp, rest = parse_http_response(raw)
        assert resp.status == 503, raw
        assert resp.header("content-type").startswith("application/problem+json"), raw
    # The busy ones are unaffected: they finish their commands.
    b.send(b"NG\r\n")
    assert b.read_reply() == "PONG"
    time.sleep(0.3)  # b, quiet for 250 ms, makes room for the metrics request
    m = http_get(server.http_port, "/metrics").body.decode()
    assert metric_value(m, "floodgate_connections_closed_total",
                        {"protocol": "resp", "reason": "evicted"}) >= 1, m
    assert metric_value(m, "floodgate_connections_refused_total",
                        {"protocol": "resp", "reason": "max_connections"}) >= 1, m
    assert server.wait_for(r"msg=\"connection evicted\".*reason=max_connections", 2), \
        server.stderr_text()


def test_bad_rule_exits_1_with_position(start_server):
    server = start_server("rules:\n  api:\n    algorithm: fixed_window\n    limits: [10/fortnight]\n",
                          wait_listening=False)
    code = server.wait_exit(10)
    assert code == 1, f"exit {code}; stderr:\n{server.stderr_text()}"
    text = server.stderr_text()
    path = re.escape(str(server.config_path))
    assert re.search(path + r":4:\d+: ", text), text
    assert "fortnight" in text, text
    assert "msg=listening" not in text


@pytest.mark.parametrize("name", ["unknown_algorithm.yaml", "duplicate_rule.yaml",
                                  "syntax_error.yaml", "zero_count.yaml"])
def test_example_bad_configs_exit_1(floodgate_bin, name):
    path = SOURCE_DIR / "examples" / "bad" / name
    out = subprocess.run([str(floodgate_bin), "serve", "--config", str(path), "--resp",
                          "127.0.0.1:0", "--http", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1, out
    assert re.search(re.escape(str(path)) + r":\d+:\d+: ", out.stderr), out.stderr
    assert "msg=listening" not in out.stderr


def test_busy_port_exits_1(start_server):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        server = start_server(CONFIG_A, resp=f"127.0.0.1:{port}", wait_listening=False)
        code = server.wait_exit(10)
        text = server.stderr_text()
        assert code == 1, f"exit {code}; stderr:\n{text}"
        assert f"127.0.0.1:{port}" in text and "in use" in text.lower(), text
        assert "level=error" in text
    finally:
        holder.close()


def test_port_held_by_another_floodgate_exits_1(start_server):
    """SO_REUSEPORT must not let a second floodgate share a port with a
    running one: each would see half the traffic and half the counts."""
    first = start_server(CONFIG_A)
    second = start_server(CONFIG_A, http=f"127.0.0.1:{first.http_port}", resp="off",
                          wait_listening=False)
    line = second.wait_for(r"msg=listening|level=error", timeout=10)
    if line is not None and "msg=listening" in line:
        second.stop()
        pytest.fail(f"a second floodgate started on the first one's port {first.http_port} "
                    f"(SO_REUSEPORT lets both bind); stderr:\n{second.stderr_text()}",
                    pytrace=False)
    code = second.wait_exit(10)
    assert code == 1, f"exit {code}; stderr:\n{second.stderr_text()}"
    assert "in use" in second.stderr_text().lower(), second.stderr_text()


def test_fronts_can_be_turned_off(start_server, resp_conn):
    server = start_server(CONFIG_A, http="off")
    assert server.http_port is None, server.listening
    assert resp_conn(server.resp_port).command("PING") == "PONG"
    both_off = start_server(CONFIG_A, http="off", resp="off", wait_listening=False)
    assert both_off.wait_exit(10) == 1, both_off.stderr_text()
    assert "level=error" in both_off.stderr_text()


def test_auth_token_env_unset_exits_1(start_server):
    server = start_server(CONFIG_A + "server: { auth_token_env: FG_ITEST_SURELY_UNSET }\n",
                          wait_listening=False)
    assert server.wait_exit(10) == 1, server.stderr_text()
    assert "FG_ITEST_SURELY_UNSET" in server.stderr_text()
