"""FloodgateASGI around a Starlette app served by uvicorn in a thread,
driven with real HTTP requests (and a websocket handshake), against a live
floodgate (reached over TLS too by the tests taking `transport`)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import socket
import threading
import time

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute

from floodgate_client import AsyncClient, FloodgateASGI

from conftest import dead_url


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
