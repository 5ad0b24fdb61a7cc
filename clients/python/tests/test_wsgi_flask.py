"""FloodgateWSGI around a Flask app served by werkzeug's WSGI server,
driven with real HTTP requests, against a live floodgate (reached over TLS
too by the tests taking `transport`)."""

from __future__ import annotations

import http.client
import io
import json
import logging
import threading
import time
import wsgiref.util

import flask
import pytest
from werkzeug.serving import make_server

from floodgate_client import (Client, FloodgateWSGI, RequestError, Reserve, SettleOutcome,
                              openai_usage)

from conftest import dead_url, used


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


def test_priority_is_passed_to_the_check(serve, floodgate, key):
    app = flask_app([])
    app.wsgi_app = FloodgateWSGI(app.wsgi_app, rule="shed", key=api_key,
                                 client=Client(floodgate.url),
                                 priority=lambda environ: environ.get("HTTP_X_PRIORITY"))
    s = serve(app)
    batch = [s.get(headers={"X-Api-Key": key, "X-Priority": "batch"})[0] for _ in range(7)]
    assert batch == [200] * 6 + [429]  # batch is denied once 60% of 10 is used
    assert s.get(headers={"X-Api-Key": key, "X-Priority": "critical"})[0] == 200


# --------------------------------------------------------------------------
# reserve=: an estimate reserved before the app, settled from its response.

def max_tokens(environ):
    """The estimate: the JSON body's max_tokens. The body is read here and
    put back for the application."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    data = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(data)
    try:
        return int(json.loads(data).get("max_tokens", 100))
    except (ValueError, AttributeError):
        return 100


def completion_app(calls, floodgate_url=None):
    app = flask.Flask("floodgate_wsgi_reserve_test")

    @app.post("/v1/chat/completions")
    def completions():
        doc = flask.request.get_json()
        calls.append(doc)
        return flask.jsonify({
            "id": "chatcmpl-test", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": doc["used"] - 1,
                      "total_tokens": doc["used"]}})

    @app.post("/text")
    def text():
        return flask.Response("total_tokens: 3", mimetype="text/plain")

    @app.post("/stream")
    def stream():
        def events():
            yield 'data: {"usage":{"total_tokens":3}}\n\n'
            yield "data: [DONE]\n\n"
        return flask.Response(events(), mimetype="text/event-stream")

    @app.post("/big")
    def big():
        return flask.jsonify({"pad": "x" * 300, "usage": {"total_tokens": 3}})

    @app.post("/boom")
    def boom():
        raise RuntimeError("the model fell over")

    @app.post("/settles-itself")
    def settles_itself():
        # The app settles the reservation itself: the middleware's settle then fails.
        r = flask.request.environ["floodgate.reservation"]
        with Client(floodgate_url) as c:
            c.settle("tokens", flask.request.headers["X-Api-Key"], r.reservation, 7)
        return flask.jsonify({"usage": {"total_tokens": 20}})

    return app


class Outcomes:
    """What on_settle was told, and a wait for it: a WSGI server closes the
    body's iterable (where the settle runs) after the client has its answer."""

    def __init__(self):
        self.items = []
        self.cond = threading.Condition()

    def __call__(self, outcome):
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
    return FloodgateWSGI(app.wsgi_app, rule="tokens", key=api_key, client=Client(floodgate.url),
                         reserve=Reserve(estimate=max_tokens, **reserve), on_settle=outcomes)


def test_reserve_settles_from_openai_usage(serve, floodgate, key):
    calls, outcomes = [], Outcomes()
    app = completion_app(calls)
    app.wsgi_app = reserving(app, floodgate, outcomes)
    s = serve(app)
    totals = [37, 120, 5, 256]
    for i, total in enumerate(totals):
        status, fields, body = s.post("/v1/chat/completions",
                                      {"max_tokens": 300, "used": total}, {"X-Api-Key": key})
        assert status == 200, body
        assert json.loads(body)["usage"]["total_tokens"] == total
        left = 1000 - sum(totals[:i]) - 300  # the estimate is taken; earlier requests settled
        assert fields["ratelimit"].startswith(f'"tokens";r={left};t=')
        outcomes.wait(key, i + 1)
    assert [c["max_tokens"] for c in calls] == [300] * 4  # the app read the body the estimate read
    got = outcomes.wait(key, 4)
    assert [(o.estimate, o.actual, o.from_response, o.settlement.charged) for o in got] == \
        [(300, t, True, t) for t in totals]
    assert all(o.error is None for o in got)
    assert used(floodgate.url, "tokens", key, 1000) == sum(totals)


def test_no_figure_from_the_response_settles_at_the_estimate(serve, floodgate, key):
    outcomes = Outcomes()
    app = completion_app([])
    app.wsgi_app = reserving(app, floodgate, outcomes, max_body=256)
    s = serve(app)
    for path, want in (("/text", 200), ("/stream", 200), ("/big", 200), ("/boom", 500)):
        status, _, body = s.post(path, {"max_tokens": 40}, {"X-Api-Key": key})
        assert status == want, (path, body)
    got = outcomes.wait(key, 4)
    assert [(o.actual, o.from_response, o.settlement.charged) for o in got] == [(40, False, 40)] * 4
    assert used(floodgate.url, "tokens", key, 1000) == 160


def test_a_settle_callback_that_raises_settles_at_the_estimate(serve, floodgate, key, caplog):
    def bad(environ, status, headers, body):
        raise ValueError("bad callback")

    outcomes = Outcomes()
    app = completion_app([])
    app.wsgi_app = reserving(app, floodgate, outcomes, settle=bad)
    s = serve(app)
    with caplog.at_level(logging.WARNING, logger="floodgate_client"):
        status, _, _ = s.post("/v1/chat/completions", {"max_tokens": 40, "used": 3},
                              {"X-Api-Key": key})
        assert status == 200
        [o] = outcomes.wait(key, 1)
    assert (o.actual, o.from_response) == (40, False)
    assert "settle callback raised" in caplog.text


def test_an_estimate_that_does_not_fit_is_429_and_the_app_is_not_called(serve, floodgate, key):
    calls, outcomes = [], Outcomes()
    app = completion_app(calls)
    app.wsgi_app = reserving(app, floodgate, outcomes)
    s = serve(app)
    assert s.post("/v1/chat/completions", {"max_tokens": 900, "used": 900},
                  {"X-Api-Key": key})[0] == 200
    outcomes.wait(key, 1)
    status, fields, body = s.post("/v1/chat/completions", {"max_tokens": 200, "used": 1},
                                  {"X-Api-Key": key})
    assert status == 429
    assert fields["content-type"] == "application/problem+json"
    assert 1 <= int(fields["retry-after"]) <= 86400
    problem = json.loads(body)
    assert (problem["status"], problem["title"]) == (429, "Too Many Requests")
    assert problem["detail"] == (f"Too many requests: an estimate of 200 does not fit; "
                                 f"retry after {fields['retry-after']} s.")
    assert len(calls) == 1
    assert used(floodgate.url, "tokens", key, 1000) == 900


def test_a_failed_settle_is_logged_and_the_response_untouched(serve, floodgate, key, caplog):
    outcomes = Outcomes()
    app = completion_app([], floodgate.url)
    app.wsgi_app = reserving(app, floodgate, outcomes)
    s = serve(app)
    with caplog.at_level(logging.WARNING, logger="floodgate_client"):
        status, _, body = s.post("/settles-itself", {"max_tokens": 50}, {"X-Api-Key": key})
        assert status == 200 and json.loads(body)["usage"]["total_tokens"] == 20
        [o] = outcomes.wait(key, 1)
    assert o.settlement is None
    assert isinstance(o.error, RequestError) and "settled already" in str(o.error)
    assert "floodgate settle failed" in caplog.text
    assert used(floodgate.url, "tokens", key, 1000) == 7


def test_reserve_is_not_with_cost_or_wait_ms():
    with pytest.raises(ValueError):
        FloodgateWSGI(lambda e, s: [], rule="tokens", reserve=Reserve(estimate=10), cost=2)
    with pytest.raises(ValueError):
        FloodgateWSGI(lambda e, s: [], rule="tokens", reserve=Reserve(estimate=10), wait_ms=5)
    with pytest.raises(TypeError):
        FloodgateWSGI(lambda e, s: [], rule="tokens", reserve={"estimate": 10})
