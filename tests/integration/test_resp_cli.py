"""The RESP front driven by redis-cli and by raw sockets."""

import subprocess
import time

import pytest

from conftest import RespConn, avoid_window_edge, require_tool

CONFIG = """\
rules:
  five: { algorithm: fixed_window, limits: [5/minute] }
  log3: { algorithm: sliding_log, limits: [3/hour] }
  api:  { algorithm: sliding_log, limits: [60/minute] }
"""


@pytest.fixture(scope="module")
def redis_cli():
    return require_tool("redis-cli", "redis-tools")


def cli(redis_cli, port, *args, stdin=None, extra=()):
    out = subprocess.run([redis_cli, "-h", "127.0.0.1", "-p", str(port), *extra, *map(str, args)],
                         input=stdin, capture_output=True, text=True, timeout=20)
    return out.returncode, out.stdout, out.stderr


def ints(stdout):
    return [int(x) for x in stdout.split()]


def test_fg_check_exact_limit(start_server, redis_cli):
    server = start_server(CONFIG)
    avoid_window_edge(60)
    for i in range(5):
        rc, out, err = cli(redis_cli, server.resp_port, "FG.CHECK", "five", "user:1")
        assert rc == 0, err
        allowed, limit, remaining, retry, reset = ints(out)
        assert (allowed, limit, remaining, retry) == (1, 5, 4 - i, 0), out
        assert 0 < reset <= 60_000
    rc, out, err = cli(redis_cli, server.resp_port, "FG.CHECK", "five", "user:1")
    allowed, limit, remaining, retry, reset = ints(out)
    assert (allowed, limit, remaining) == (0, 5, 0), out
    assert 0 < retry <= 60_000, out
    assert 0 < reset <= 60_000, out
    # Another subject has its own count.
    rc, out, err = cli(redis_cli, server.resp_port, "FG.CHECK", "five", "user:2")
    assert ints(out)[:3] == [1, 5, 4]
    # A denied request consumed nothing: still denied, still remaining 0.
    rc, out, err = cli(redis_cli, server.resp_port, "fg.check", "five", "user:1")
    assert ints(out)[:3] == [0, 5, 0]


def test_sliding_log_and_reset(start_server, redis_cli):
    server = start_server(CONFIG)
    for i in range(3):
        _, out, _ = cli(redis_cli, server.resp_port, "FG.CHECK", "log3", "phone:+1555")
        assert ints(out)[:3] == [1, 3, 2 - i]
    _, out, _ = cli(redis_cli, server.resp_port, "FG.CHECK", "log3", "phone:+1555")
    assert ints(out)[0] == 0 and ints(out)[3] > 0
    _, out, _ = cli(redis_cli, server.resp_port, "FG.RESET", "log3", "phone:+1555")
    assert out.strip() == "OK"
    _, out, _ = cli(redis_cli, server.resp_port, "FG.CHECK", "log3", "phone:+1555")
    assert ints(out)[:4] == [1, 3, 2, 0]


def test_cl_throttle_fresh_key_figures(start_server, redis_cli):
    server = start_server(CONFIG)
    rc, out, err = cli(redis_cli, server.resp_port, "CL.THROTTLE", "cell:k", 4, 1, 1)
    assert rc == 0, err
    assert ints(out) == [0, 5, 4, -1, 1]
    # redis-cell's own example: 15 30 60 on a fresh key.
    _, out, _ = cli(redis_cli, server.resp_port, "CL.THROTTLE", "cell:other", 15, 30, 60, 1)
    assert ints(out) == [0, 16, 15, -1, 2]
    # One per minute, burst 4: five at once, then limited for about a minute.
    # (A long period, so a slow machine cannot refill a token mid-test.)
    assert ints(cli(redis_cli, server.resp_port, "CL.THROTTLE", "cell:seq", 4, 1, 60)[1]) == \
        [0, 5, 4, -1, 60]
    for remaining in (3, 2, 1, 0):
        _, out, _ = cli(redis_cli, server.resp_port, "CL.THROTTLE", "cell:seq", 4, 1, 60)
        limited, limit, rem, retry, reset = ints(out)
        assert (limited, limit, rem, retry) == (0, 5, remaining, -1), out
        assert (5 - remaining) * 60 - 5 <= reset <= (5 - remaining) * 60, out
    _, out, _ = cli(redis_cli, server.resp_port, "CL.THROTTLE", "cell:seq", 4, 1, 60)
    limited, limit, rem, retry, reset = ints(out)
    assert (limited, limit, rem) == (1, 5, 0), out
    assert 50 <= retry <= 60 and 290 <= reset <= 300, out
    # quantity 0 peeks without consuming; quantity 2 on a fresh key takes 2.
    _, out, _ = cli(redis_cli, server.resp_port, "CL.THROTTLE", "cell:q", 4, 1, 60, 0)
    assert ints(out)[:3] == [0, 5, 5], out
    _, out, _ = cli(redis_cli, server.resp_port, "CL.THROTTLE", "cell:q", 4, 1, 60, 2)
    assert ints(out)[:4] == [0, 5, 3, -1], out


@pytest.mark.parametrize("args, fragment", [
    (["FOO", "bar"], "ERR unknown command 'FOO', with args beginning with: 'bar'"),
    (["FG.CHECK", "api"], "ERR wrong number of arguments for 'fg.check' command"),
    (["FG.CHECK", "nope", "k"], "ERR unknown rule 'nope'"),
    (["FG.RESET", "nope", "k"], "ERR unknown rule 'nope'"),
    (["FG.CHECK", "api", "k", "COST", "x"], "ERR"),
    (["FG.CHECK", "api", "k", "COST", "-1"], "ERR"),
    (["FG.CHECK", "api", "k", "TIER", "gold"], "ERR"),
    (["FG.CHECK", "api", "k", "COLOR", "red"], "ERR"),
    (["CL.THROTTLE", "k", "4", "x", "1"], "ERR"),
    (["CL.THROTTLE", "k", "4", "0", "1"], "ERR"),
    (["CL.THROTTLE", "k", "4", "1", "0"], "ERR"),
    (["CL.THROTTLE", "k", "4", "-1", "1"], "ERR"),
    (["CL.THROTTLE", "k", "-1", "1", "1"], "ERR"),
    (["CL.THROTTLE", "k", "4", "1", "1", "-1"], "ERR"),
    (["CL.THROTTLE", "k", "4", "1"], "ERR wrong number of arguments for 'cl.throttle' command"),
    (["SELECT", "1"], "ERR"),
    (["HELLO", "3"], "NOPROTO"),
])
def test_errors(start_server, redis_cli, args, fragment):
    server = start_server(CONFIG)
    rc, out, err = cli(redis_cli, server.resp_port, *args)
    assert out.startswith(fragment), (args, out, err)
    # The connection and the server still work afterwards.
    rc, out, err = cli(redis_cli, server.resp_port, "PING")
    assert out.strip() == "PONG"


def test_housekeeping_commands(start_server, redis_cli):
    server = start_server(CONFIG)
    p = server.resp_port
    assert cli(redis_cli, p, "PING")[1].strip() == "PONG"
    assert cli(redis_cli, p, "PING", "hello")[1].strip() == "hello"
    assert cli(redis_cli, p, "ECHO", "hi there")[1].strip() == "hi there"
    assert cli(redis_cli, p, "SELECT", "0")[1].strip() == "OK"
    assert cli(redis_cli, p, "HELLO", "2")[1].split("\n")[:2] == ["server", "floodgate"]
    info = cli(redis_cli, p, "INFO")[1]
    assert "redis_version:" in info and "loading:0" in info, info
    assert cli(redis_cli, p, "COMMAND", "DOCS")[1].strip() == ""
    assert cli(redis_cli, p, "COMMAND")[1].strip() == ""
    assert cli(redis_cli, p, "CLIENT", "SETINFO", "lib-name", "itest")[1].strip() == "OK"
    # What redis-benchmark asks for: floodgate persists nothing.
    assert cli(redis_cli, p, "CONFIG", "GET", "save")[1].split("\n")[:2] == ["save", ""]
    assert cli(redis_cli, p, "CONFIG", "GET", "appendonly")[1].split("\n")[:2] == [
        "appendonly", "no"]
    assert cli(redis_cli, p, "CONFIG", "GET", "maxmemory")[1].strip() == ""
    # Several commands on one connection (stdin, one per line).
    rc, out, err = cli(redis_cli, p, stdin="CLIENT SETNAME tester\nCLIENT GETNAME\nCLIENT ID\n")
    lines = out.split("\n")
    assert lines[0] == "OK" and lines[1] == "tester" and int(lines[2]) > 0, out


def test_inline_commands_and_pipelining_raw_socket(start_server, resp_conn):
    server = start_server(CONFIG)
    c = resp_conn(server.resp_port)
    # Inline commands, CRLF and bare LF.
    c.send(b"PING\r\n")
    assert c.read_reply() == "PONG"
    c.send(b"FG.CHECK api user1\n")
    r = c.read_reply()
    assert r[:4] == [1, 60, 59, 0] and 0 < r[4] <= 60_000, r
    c.send(b"FG.CHECK api user1\r\n")
    r = c.read_reply()
    assert r[:4] == [1, 60, 58, 0], r
    # 50 multibulk commands plus inline ones in one send, answered in order.
    batch = b"".join(RespConn.encode("FG.CHECK", "api", "pipe") for _ in range(50))
    batch += b"PING\r\nECHO done\r\n" + RespConn.encode("FG.CHECK", "api", "pipe")
    c.send(batch)
    for i in range(50):
        r = c.read_reply()
        assert r[:3] == [1, 60, 59 - i], (i, r)
    assert c.read_reply() == "PONG"
    assert c.read_reply() == b"done"
    r = c.read_reply()
    assert r[:3] == [1, 60, 9], r
    # A command split across many small writes.
    msg = RespConn.encode("ECHO", "x" * 1000)
    for i in range(0, len(msg), 7):
        c.send(msg[i:i + 7])
        time.sleep(0.0005)
    assert c.read_reply() == b"x" * 1000
    # QUIT answers OK then closes.
    c.send(b"QUIT\r\n")
    assert c.read_reply() == "OK"
    assert c.read_until_closed() == b""


@pytest.mark.parametrize("garbage", [b"*abc\r\n", b"*1\r\n$-5\r\n", b"*1\r\n$x\r\n",
                                     b"*2\r\n$4\r\nPING\r\n:1\r\n"])
def test_malformed_stream_closes_only_that_connection(start_server, resp_conn, redis_cli, garbage):
    server = start_server(CONFIG)
    good = resp_conn(server.resp_port)
    assert good.command("FG.CHECK", "api", "good")[:3] == [1, 60, 59]
    bad = resp_conn(server.resp_port)
    bad.send(garbage)
    rest = bad.read_until_closed()
    assert rest.startswith(b"-ERR Protocol error: "), rest
    assert rest.count(b"\r\n") == 1, f"want exactly one error line, got {rest!r}"
    # The other connection and new ones keep working.
    assert good.command("FG.CHECK", "api", "good")[:3] == [1, 60, 58]
    assert good.command("PING") == "PONG"
    assert cli(redis_cli, server.resp_port, "PING")[1].strip() == "PONG"


def test_malformed_after_valid_commands_answers_those_first(start_server, resp_conn):
    server = start_server(CONFIG)
    c = resp_conn(server.resp_port)
    c.send(b"PING\r\n" + RespConn.encode("ECHO", "a") + b"*abc\r\n")
    assert c.read_reply() == "PONG"
    assert c.read_reply() == b"a"
    rest = c.read_until_closed()
    assert rest.startswith(b"-ERR Protocol error"), rest


AUTH_CONFIG = CONFIG + 'server: { auth_token: "s3cret-token" }\n'


def test_auth_with_redis_cli(start_server, redis_cli):
    server = start_server(AUTH_CONFIG)
    assert server.listening.get("auth") == "token", server.listening
    p = server.resp_port
    rc, out, err = cli(redis_cli, p, "FG.CHECK", "api", "k")
    assert out.startswith("NOAUTH Authentication required."), out
    rc, out, err = cli(redis_cli, p, "PING")
    assert out.startswith("NOAUTH"), out
    rc, out, err = cli(redis_cli, p, "FG.CHECK", "api", "k", extra=["--no-auth-warning", "-a",
                                                                    "s3cret-token"])
    assert rc == 0, err
    assert ints(out)[:3] == [1, 60, 59], (out, err)
    rc, out, err = cli(redis_cli, p, "PING", extra=["--no-auth-warning", "-a", "wrong"])
    assert "WRONGPASS" in out + err, (out, err)
    assert "PONG" not in out, out
    # AUTH default <token> (the ACL form) also works.
    rc, out, err = cli(redis_cli, p, stdin="AUTH default s3cret-token\nPING\n")
    assert out.split("\n")[:2] == ["OK", "PONG"], out


def test_auth_raw(start_server, resp_conn):
    server = start_server(AUTH_CONFIG)
    c = resp_conn(server.resp_port)
    assert str(c.command("ECHO", "x")).startswith("NOAUTH Authentication required.")
    assert str(c.command("AUTH", "nope")).startswith("WRONGPASS")
    assert str(c.command("HELLO", "2")).startswith("NOAUTH")
    assert c.command("AUTH", "s3cret-token") == "OK"
    assert c.command("ECHO", "x") == b"x"
    d = resp_conn(server.resp_port)
    r = d.command("HELLO", "2", "AUTH", "default", "s3cret-token", "SETNAME", "n1")
    assert isinstance(r, list) and b"proto" in r, r
    assert d.command("CLIENT", "GETNAME") == b"n1"
    assert d.command("FG.CHECK", "api", "k")[:3] == [1, 60, 59]
