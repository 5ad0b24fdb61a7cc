"""FloodgateWSGI around a Flask app served by werkzeug's WSGI server,
driven with real HTTP requests, against a live floodgate (reached over TLS
too by the tests taking `transport`)."""

from __future__ import annotations

import http.client
import json
import threading
import wsgiref.util

import flask
import pytest
from werkzeug.serving import make_server

from floodgate_client import Client, FloodgateWSGI, RequestError

from conftest import dead_url


class Served:
    """A WSGI app on a free port in a thread; get() makes one request."""

    def __init__(self, app):
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def get(self, path="/", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def stop(self):
        self.server.shutdown()
        self.thread.join(5)
        self.server.server_close()


def flask_app(calls):
    app = flask.Flask("floodgate_wsgi_test")

    @app.get("/")
    def index():
        calls.append(flask.request.headers.get("X-Api-Key"))
        return flask.Response("hello", headers={"X-App": "1"})

    return app


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


def api_key(environ):
    return environ.get("HTTP_X_API_KEY")


def test_five_then_429_with_floodgate_fields(serve, proxy, key):
    calls = []
    app = flask_app(calls)
    app.wsgi_app = FloodgateWSGI(app.wsgi_app, rule="five", key=api_key,
                                 client=Client(proxy.url))
    s = serve(app)
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
    assert fields["ratelimit"] == '"five";r=0;t=60'
    assert fields["content-type"] == "application/problem+json"
    problem = json.loads(body)
    assert problem == {"type": "about:blank", "title": "Too Many Requests", "status": 429,
                       "detail": f"Too many requests; retry after {fields['retry-after']} s."}
    assert "x-app" not in fields
    assert calls == [key] * 5  # the denied request never reached the app


def test_keys_from_a_header_are_independent_and_absent_key_passes(serve, transport, key):
    calls = []
    app = flask_app(calls)
    app.wsgi_app = FloodgateWSGI(app.wsgi_app, rule="five", key=api_key,
                                 client=Client(transport.url, **transport.tls))
    s = serve(app)
    a = [s.get(headers={"X-Api-Key": key + "a"})[0] for _ in range(6)]
    b = [s.get(headers={"X-Api-Key": key + "b"})[0] for _ in range(6)]
    assert a == b == [200] * 5 + [429]
    # No key: not checked, no fields added.
    status, fields, _ = s.get()
    assert status == 200 and "ratelimit" not in fields
    assert len(calls) == 11


def test_cost_and_tier_callables(serve, floodgate, key):
    app = flask_app([])
    app.wsgi_app = FloodgateWSGI(
        app.wsgi_app, rule="tiered", key=api_key, client=Client(floodgate.url),
        cost=lambda environ: int(environ.get("HTTP_X_COST", "1")),
        tier=lambda environ: environ.get("HTTP_X_PLAN"))
    s = serve(app)
    status, fields, _ = s.get(headers={"X-Api-Key": key, "X-Plan": "pro", "X-Cost": "20"})
    assert status == 200
    assert (fields["ratelimit-policy"], fields["ratelimit"]) == \
        ('"tiered";q=50;w=60', '"tiered";r=30;t=60')
    status, fields, _ = s.get(headers={"X-Api-Key": key, "X-Cost": "4"})
    assert (status, fields["ratelimit"]) == (200, '"tiered";r=1;t=60')
    status, fields, _ = s.get(headers={"X-Api-Key": key, "X-Cost": "2"})
    assert (status, fields["ratelimit"]) == (429, '"tiered";r=1;t=60')


def test_unknown_rule_raises_request_error(floodgate):
    mw = FloodgateWSGI(lambda environ, start_response: [b""], rule="no_such_rule",
                       key=lambda environ: "k", client=Client(floodgate.url))
    environ = {}
    wsgiref.util.setup_testing_defaults(environ)
    with pytest.raises(RequestError, match="unknown rule 'no_such_rule'"):
        mw(environ, lambda status, headers: None)


@pytest.mark.parametrize("on_error", ["allow", "deny"])
def test_unreachable_floodgate_on_error(serve, on_error, key):
    calls = []
    app = flask_app(calls)
    app.wsgi_app = FloodgateWSGI(app.wsgi_app, rule="five", key=api_key,
                                 client=Client(dead_url(), timeout=1), on_error=on_error)
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


def test_on_error_must_be_allow_or_deny():
    with pytest.raises(ValueError):
        FloodgateWSGI(lambda e, s: [], rule="five", on_error="ignore")
