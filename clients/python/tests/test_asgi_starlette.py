"""FloodgateASGI around a Starlette app served by uvicorn in a thread,
driven with real HTTP requests (and a websocket handshake), against a live
floodgate (reached over TLS too by the tests taking `transport`)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import logging
import os
import socket
import threading
import time

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute

from floodgate_client import (AsyncClient, FloodgateASGI, RequestError, Reserve, SettleOutcome,
                              openai_usage)

from conftest import dead_url, used


class Served:
    """An ASGI app under uvicorn on a free port, in a thread."""

    def __init__(self, app):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            assert self.thread.is_alive(), "uvicorn stopped"
            time.sleep(0.02)

    def get(self, path="/", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def post(self, path, doc, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("POST", path, json.dumps(doc).encode(),
                         headers={"Content-Type": "application/json", **(headers or {})})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def starlette_app(calls, events):
    async def index(request):
        calls.append(request.headers.get("x-api-key"))
        return PlainTextResponse("hello", headers={"X-App": "1"})

    async def ws(websocket):
        await websocket.accept()
        await websocket.send_text("hi")
        await websocket.close()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        events.append("startup")
        yield

    return Starlette(routes=[Route("/", index), WebSocketRoute("/ws", ws)], lifespan=lifespan)


def api_key(scope):
    for name, value in scope["headers"]:
        if name == b"x-api-key":
            return value.decode()
    return None


@pytest.fixture
def serve():
    served = []

    def start(app):
        s = Served(app)
        served.append(s)
        return s

    yield start
    for s in served:
        s.stop()


def test_five_then_429_with_floodgate_fields(serve, proxy, key):
    calls, events = [], []
    app = FloodgateASGI(starlette_app(calls, events), rule="five", key=api_key,
                        client=AsyncClient(proxy.url))
    s = serve(app)
    assert events == ["startup"]  # the lifespan scope went through
    for i in range(5):
        status, fields, body = s.get(headers={"X-Api-Key": key})
        assert (status, body, fields["x-app"]) == (200, b"hello", "1")
        fstatus, floodgate_fields = proxy.last()
        assert fstatus == 200
        assert fields["ratelimit-policy"] == floodgate_fields["ratelimit-policy"] == \
            '"five";q=5;w=60'
        assert fields["ratelimit"] == floodgate_fields["ratelimit"] == f'"five";r={4 - i};t=60'
        assert "retry-after" not in fields
    status, fields, body = s.get(headers={"X-Api-Key": key})
    fstatus, floodgate_fields = proxy.last()
    assert (status, fstatus) == (429, 429)
    for name in ("retry-after", "ratelimit-policy", "ratelimit"):
        assert fields[name] == floodgate_fields[name], name
    assert 55 <= int(fields["retry-after"]) <= 60
    assert fields["content-type"] == "application/problem+json"
    assert json.loads(body) == {
        "type": "about:blank", "title": "Too Many Requests", "status": 429,
        "detail": f"Too many requests; retry after {fields['retry-after']} s."}
    assert calls == [key] * 5
    assert proxy.connections == 1  # one kept-alive connection for six checks


def test_keys_cost_and_tier(serve, transport, key):
    calls = []

    async def cost(scope):  # an async callable is awaited
        return 20 if scope["query_string"] == b"big" else 1

    app = FloodgateASGI(starlette_app(calls, []), rule="tiered", key=api_key,
                        cost=cost, tier=lambda scope: "pro" if scope["path"] == "/" else None,
                        client=AsyncClient(transport.url, **transport.tls))
    s = serve(app)
    status, fields, _ = s.get("/?big", headers={"X-Api-Key": key})
    assert (status, fields["ratelimit-policy"], fields["ratelimit"]) == \
        (200, '"tiered";q=50;w=60', '"tiered";r=30;t=60')
    statuses = [s.get("/?big", headers={"X-Api-Key": key})[0] for _ in range(2)]
    assert statuses == [200, 429]  # 50 - 20 - 20 = 10 left: 20 more is denied
    other = [s.get(headers={"X-Api-Key": key + "b"})[0] for _ in range(3)]
    assert other == [200, 200, 200]
    status, fields, _ = s.get()  # no key: not checked
    assert status == 200 and "ratelimit" not in fields
    assert len(calls) == 6


def test_websocket_passes_through_unchecked(serve, floodgate, key):
    checked = []

    def key_of(scope):
        checked.append(scope["type"])
        return key

    app = FloodgateASGI(starlette_app([], []), rule="five", key=key_of,
                        client=AsyncClient(floodgate.url))
    s = serve(app)
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        nonce = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n"
                      f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
        data = b""
        while b"\x81\x02hi" not in data:  # (the handshake's accept key may hold "hi")
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 101 ")
    assert b"\x81\x02hi" in data  # the app's text frame
    assert checked == []  # the key function never ran for the websocket
    s.get(headers={"X-Api-Key": key})
    assert checked == ["http"]


@pytest.mark.parametrize("on_error", ["allow", "deny"])
def test_unreachable_floodgate_on_error(serve, on_error, key):
    calls = []
    app = FloodgateASGI(starlette_app(calls, []), rule="five", key=api_key,
                        client=AsyncClient(dead_url(), timeout=1), on_error=on_error)
    s = serve(app)
    status, fields, body = s.get(headers={"X-Api-Key": key})
    if on_error == "allow":
        assert (status, body) == (200, b"hello")
        assert "ratelimit" not in fields
        assert calls == [key]
    else:
        assert status == 503
        assert fields["content-type"] == "application/problem+json"
        assert json.loads(body)["status"] == 503
        assert calls == []


def test_priority_is_passed_to_the_check(serve, floodgate, key):
    async def priority(scope):
        return "batch"

    app = FloodgateASGI(starlette_app([], []), rule="shed", key=api_key, priority=priority,
                        client=AsyncClient(floodgate.url))
    s = serve(app)
    assert [s.get(headers={"X-Api-Key": key})[0] for _ in range(7)] == [200] * 6 + [429]


# --------------------------------------------------------------------------
# reserve=: an estimate reserved before the app, settled from its response.

def header_max_tokens(scope):
    """The estimate, from X-Max-Tokens (an ASGI middleware does not read the body)."""
    for name, value in scope["headers"]:
        if name == b"x-max-tokens":
            return int(value)
    return 100


def completion_app(calls, floodgate_url=None):
    async def completions(request):
        doc = await request.json()
        calls.append(doc)
        return JSONResponse({
            "id": "chatcmpl-test", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": doc["used"] - 1,
                      "total_tokens": doc["used"]}})

    async def text(request):
        return PlainTextResponse("total_tokens: 3")

    async def stream(request):
        async def events():
            yield 'data: {"usage":{"total_tokens":3}}\n\n'
            yield "data: [DONE]\n\n"
        return StreamingResponse(events(), media_type="text/event-stream")

    async def big(request):
        return JSONResponse({"pad": "x" * 300, "usage": {"total_tokens": 3}})

    async def boom(request):
        raise RuntimeError("the model fell over")

    async def settles_itself(request):
        r = request.scope["floodgate.reservation"]
        async with AsyncClient(floodgate_url) as c:
            await c.settle("tokens", request.headers["x-api-key"], r.reservation, 7)
        return JSONResponse({"usage": {"total_tokens": 20}})

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                             Route("/text", text, methods=["POST"]),
                             Route("/stream", stream, methods=["POST"]),
                             Route("/big", big, methods=["POST"]),
                             Route("/boom", boom, methods=["POST"]),
                             Route("/settles-itself", settles_itself, methods=["POST"])])


class Outcomes:
    """What on_settle was told (from uvicorn's thread), and a wait for it."""

    def __init__(self):
        self.items = []
        self.cond = threading.Condition()

    async def __call__(self, outcome):  # an async on_settle is awaited
        assert isinstance(outcome, SettleOutcome)
        with self.cond:
            self.items.append(outcome)
            self.cond.notify_all()

    def wait(self, key, n):
        deadline = time.monotonic() + 5
        with self.cond:
            while True:
                mine = [o for o in self.items if o.key == key]
                if len(mine) >= n:
                    return mine
                left = deadline - time.monotonic()
                assert left > 0, f"{len(mine)} of {n} settles for {key}"
                self.cond.wait(left)


def reserving(app, floodgate, outcomes, **reserve):
    reserve.setdefault("settle", openai_usage)
    return FloodgateASGI(app, rule="tokens", key=api_key, client=AsyncClient(floodgate.url),
                         reserve=Reserve(estimate=header_max_tokens, **reserve),
                         on_settle=outcomes)


def test_reserve_settles_from_openai_usage(serve, floodgate, key):
    calls, outcomes = [], Outcomes()
    s = serve(reserving(completion_app(calls), floodgate, outcomes))
    totals = [37, 120, 5, 256]
    for i, total in enumerate(totals):
        status, fields, body = s.post("/v1/chat/completions", {"used": total},
                                      {"X-Api-Key": key, "X-Max-Tokens": "300"})
        assert status == 200, body
        assert json.loads(body)["usage"]["total_tokens"] == total
        left = 1000 - sum(totals[:i]) - 300
        assert fields["ratelimit"].startswith(f'"tokens";r={left};t=')
        outcomes.wait(key, i + 1)
    got = outcomes.wait(key, 4)
    assert [(o.estimate, o.actual, o.from_response, o.settlement.charged) for o in got] == \
        [(300, t, True, t) for t in totals]
    assert used(floodgate.url, "tokens", key, 1000) == sum(totals)


def test_no_figure_from_the_response_settles_at_the_estimate(serve, floodgate, key):
    outcomes = Outcomes()
    s = serve(reserving(completion_app([]), floodgate, outcomes, max_body=256))
    for path, want in (("/text", 200), ("/stream", 200), ("/big", 200), ("/boom", 500)):
        status, _, body = s.post(path, {}, {"X-Api-Key": key, "X-Max-Tokens": "40"})
        assert status == want, (path, body)
    got = outcomes.wait(key, 4)
    assert [(o.actual, o.from_response, o.settlement.charged) for o in got] == [(40, False, 40)] * 4
    assert used(floodgate.url, "tokens", key, 1000) == 160


def test_async_estimate_and_settle_callbacks(serve, floodgate, key):
    async def estimate(scope):
        await asyncio.sleep(0)
        return 60

    async def settle(scope, status, headers, body):
        return json.loads(body)["usage"]["total_tokens"] * 2

    outcomes = Outcomes()
    app = FloodgateASGI(completion_app([]), rule="tokens", key=api_key,
                        client=AsyncClient(floodgate.url),
                        reserve=Reserve(estimate=estimate, settle=settle), on_settle=outcomes)
    s = serve(app)
    assert s.post("/v1/chat/completions", {"used": 9}, {"X-Api-Key": key})[0] == 200
    [o] = outcomes.wait(key, 1)
    assert (o.estimate, o.actual, o.from_response) == (60, 18, True)
    assert used(floodgate.url, "tokens", key, 1000) == 18


def test_an_estimate_that_does_not_fit_is_429_and_the_app_is_not_called(serve, floodgate, key):
    calls, outcomes = [], Outcomes()
    s = serve(reserving(completion_app(calls), floodgate, outcomes))
    assert s.post("/v1/chat/completions", {"used": 900},
                  {"X-Api-Key": key, "X-Max-Tokens": "900"})[0] == 200
    outcomes.wait(key, 1)
    status, fields, body = s.post("/v1/chat/completions", {"used": 1},
                                  {"X-Api-Key": key, "X-Max-Tokens": "200"})
    assert status == 429
    assert fields["content-type"] == "application/problem+json"
    assert 1 <= int(fields["retry-after"]) <= 86400
    assert json.loads(body)["detail"] == (f"Too many requests: an estimate of 200 does not fit; "
                                          f"retry after {fields['retry-after']} s.")
    assert len(calls) == 1
    assert used(floodgate.url, "tokens", key, 1000) == 900


def test_a_failed_settle_is_logged_and_the_response_untouched(serve, floodgate, key, caplog):
    outcomes = Outcomes()
    s = serve(reserving(completion_app([], floodgate.url), floodgate, outcomes))
    with caplog.at_level(logging.WARNING, logger="floodgate_client"):
        status, _, body = s.post("/settles-itself", {}, {"X-Api-Key": key, "X-Max-Tokens": "50"})
        assert status == 200 and json.loads(body)["usage"]["total_tokens"] == 20
        [o] = outcomes.wait(key, 1)
    assert o.settlement is None
    assert isinstance(o.error, RequestError) and "settled already" in str(o.error)
    assert "floodgate settle failed" in caplog.text
    assert used(floodgate.url, "tokens", key, 1000) == 7
