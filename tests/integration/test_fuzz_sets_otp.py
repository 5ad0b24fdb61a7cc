"""Random hostile input to the expiring sets' and OTP's commands and
routes (seeded, so a failure replays): every request gets a well-formed
answer (a reply or an error), the connection stays usable, the server
stays up, and on Redis nothing is written without a TTL."""

import random
import socket

import pytest

from conftest import RespConn, RespError, parse_http_response

CONFIG = """\
redis: { timeout_ms: 2000 }
sets: { max_members: 5, max_ttl: 1m }
otp: { issue_limit: 50/5m, verify_limit: 50/15m }
rules: {}
"""
ENV = {"FG_OTP_SECRET": "fuzz-secret-0123456789abcdef"}

COMMANDS = ["FG.SADD", "FG.SREM", "FG.SISMEMBER", "FG.SCARD", "FG.SMEMBERS", "FG.OTP.ISSUE",
            "FG.OTP.VERIFY"]
PATHS = ["/v1/sets/k", "/v1/sets/%00", "/v1/sets/a%2Fb?member=x", "/v1/sets/k?member=",
         "/v1/otp/issue", "/v1/otp/verify", "/v1/sets/" + "x" * 600]


def random_bytes(rng, n):
    alphabet = [b"a", b"1", b"0", b" ", b"\x00", b"\xff", b"\r\n", b"{", b"}", b"-", b"+", b"9"]
    return b"".join(rng.choice(alphabet) for _ in range(n))


def random_arg(rng):
    kind = rng.randrange(7)
    if kind == 0:
        return b""
    if kind == 1:
        return str(rng.choice([0, -1, 1, 999, 1000, 60000, 60001, 2**63 - 1, 2**64])).encode()
    if kind == 2:
        return b"x" * rng.choice([1, 511, 512, 513, 2000])
    if kind == 3:
        return b"%06d" % rng.randrange(1000000)
    if kind == 4:
        return b"WITHTTL"
    return random_bytes(rng, rng.randrange(1, 20))


def random_json(rng):
    fields = ['"member"', '"ttl_ms"', '"subject"', '"code"', '"x"', '""']
    values = ['"m"', "1", "-1", "1.5", "1e3", "null", "true", "[]", "{}", '"123456"',
              '"+15550100"', "99999999999999999999", '"\\u0000"', '"\\ud800"']
    parts = [f"{rng.choice(fields)}:{rng.choice(values)}" for _ in range(rng.randrange(4))]
    body = "{" + ",".join(parts) + "}"
    if rng.random() < 0.2:
        body = body[: rng.randrange(len(body) + 1)]
    return body.encode()


@pytest.fixture(params=["memory", "redis"])
def store(request, redis_server):
    if request.param == "memory":
        return [], None
    backend = redis_server()
    return ["--store", backend.url], backend


def test_random_resp_arguments(start_server, store):
    args, backend = store
    server = start_server(CONFIG, extra_args=args, env=ENV)
    rng = random.Random(1234)
    with RespConn(server.resp_port) as conn:
        for _ in range(1500):
            argv = [rng.choice(COMMANDS).encode()] + [random_arg(rng)
                                                      for _ in range(rng.randrange(5))]
            reply = conn.command(*argv)
            assert reply is not None or argv[0] == b"FG.SMEMBERS", argv
            if isinstance(reply, RespError):
                assert str(reply), argv
        assert conn.command("PING") == "PONG"
    if backend is not None:
        r = backend.client()
        assert [k for k in r.scan_iter("*") if r.pttl(k) < 0] == []


def test_random_http_bodies(start_server, store):
    args, backend = store
    server = start_server(CONFIG, extra_args=args, env=ENV)
    rng = random.Random(4321)
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        for _ in range(400):
            method = rng.choice(["POST", "GET", "DELETE", "PUT"])
            body = random_json(rng)
            s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
                method.encode(), rng.choice(PATHS).encode(), len(body), body))
            data = b""
            while True:
                try:
                    resp, rest = parse_http_response(data)
                    break
                except AssertionError:
                    chunk = s.recv(65536)
                    assert chunk, "connection closed"
                    data += chunk
            assert rest == b""
            assert resp.status in (200, 202, 400, 404, 405, 409, 429), resp
    if backend is not None:
        r = backend.client()
        assert [k for k in r.scan_iter("*") if r.pttl(k) < 0] == []
