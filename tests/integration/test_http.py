"""The HTTP/1.1 + JSON front driven by curl and by raw sockets."""

import json
import socket
import time

import pytest

from conftest import avoid_window_edge, metric_value, parse_http_response

CONFIG = """\
rules:
  api:    { algorithm: sliding_log, limits: [60/minute] }
  three:  { algorithm: sliding_log, limits: [3/hour] }
  multi:  { algorithm: fixed_window, limits: [2/minute, 100/day] }
  tiered: { algorithm: token_bucket, limits: [2/hour], tiers: { pro: [20/hour] } }
"""


def url(server, path):
    return f"http://127.0.0.1:{server.http_port}{path}"


def assert_problem(resp, status, detail_fragment=""):
    assert resp.status == status, resp
    assert resp.header("content-type").startswith("application/problem+json"), resp
    body = resp.json()
    assert body.get("status") == status, body
    assert isinstance(body.get("title"), str) and body["title"], body
    assert isinstance(body.get("detail"), str) and body["detail"], body
    assert detail_fragment.lower() in body["detail"].lower(), body
    return body


def test_post_check_allowed(start_server, curl):
    server = start_server(CONFIG)
    r = curl(url(server, "/v1/check"), data='{"rule":"api","key":"user:42"}',
             headers={"Content-Type": "application/json"})
    assert r.status == 200, r
    assert r.header("content-type").startswith("application/json")
    body = r.json()
    assert body["allowed"] is True
    assert body["rule"] == "api" and body["key"] == "user:42"
    assert (body["limit"], body["remaining"], body["retry_after_ms"]) == (60, 59, 0)
    assert 59_000 < body["reset_after_ms"] <= 60_000
    assert len(body["limits"]) == 1 and body["limits"][0]["period_ms"] == 60_000
    assert r.header("ratelimit-policy") == '"api";q=60;w=60', r
    assert r.header("ratelimit") == '"api";r=59;t=60', r
    assert r.header("retry-after") is None
    # cost and key escaping
    r = curl(url(server, "/v1/check"), data='{"rule":"api","key":"a\\"b","cost":10}')
    assert r.status == 200 and r.json()["key"] == 'a"b' and r.json()["remaining"] == 50, r


def test_get_check_then_429(start_server, curl):
    server = start_server(CONFIG)
    for i in range(3):
        r = curl(url(server, "/v1/check?rule=three&key=user%3A7"))
        assert r.status == 200, r
        assert r.json()["remaining"] == 2 - i and r.json()["key"] == "user:7"
        assert r.header("ratelimit") == f'"three";r={2 - i};t=3600', r
    r = curl(url(server, "/v1/check?rule=three&key=user%3A7"))
    assert r.status == 429, r
    body = r.json()
    assert body["allowed"] is False and body["remaining"] == 0 and body["retry_after_ms"] > 0
    retry_after = int(r.header("retry-after"))
    assert 3500 <= retry_after <= 3600, r
    assert retry_after == -(-body["retry_after_ms"] // 1000)  # ceil
    assert r.header("ratelimit-policy") == '"three";q=3;w=3600', r
    assert r.header("ratelimit").startswith('"three";r=0;t='), r
    # deny_status=403 (nginx auth_request); other values are refused.
    r = curl(url(server, "/v1/check?rule=three&key=user%3A7&deny_status=403"))
    assert r.status == 403 and r.header("retry-after") is not None, r
    assert r.json()["allowed"] is False
    r = curl(url(server, "/v1/check?rule=three&key=fresh&deny_status=403"))
    assert r.status == 200, r
    assert_problem(curl(url(server, "/v1/check?rule=three&key=x&deny_status=500")), 400)
    # HEAD is GET without the body: the query is the check (and it counts).
    r = curl(url(server, "/v1/check?rule=three&key=head"), "--head")
    assert r.status == 200 and r.header("ratelimit") == '"three";r=2;t=3600', r
    r = curl(url(server, "/v1/check?rule=three&key=head"))
    assert r.json()["remaining"] == 1, r


def test_multi_limit_headers_and_tiers(start_server, curl):
    server = start_server(CONFIG)
    avoid_window_edge(60)
    r = curl(url(server, "/v1/check?rule=multi&key=k"))
    assert r.status == 200, r
    assert r.header("ratelimit-policy") == '"multi:0";q=2;w=60, "multi:1";q=100;w=86400', r
    assert r.header("ratelimit").startswith('"multi:0";r=1;t='), r
    assert '"multi:1";r=99;t=' in r.header("ratelimit"), r
    assert [l["period_ms"] for l in r.json()["limits"]] == [60_000, 86_400_000]
    r = curl(url(server, "/v1/check"), data='{"rule":"tiered","key":"t","tier":"pro","cost":5}')
    assert r.status == 200 and r.json()["limit"] == 20 and r.json()["remaining"] == 15, r
    r = curl(url(server, "/v1/check?rule=tiered&key=t2&tier=pro&cost=3"))
    assert r.status == 200 and r.json()["remaining"] == 17, r
    r = curl(url(server, "/v1/check?rule=tiered&key=t3&cost=3"))
    assert r.status == 429 and r.json()["limit"] == 2, r


@pytest.mark.parametrize("method, path, data, status, fragment", [
    ("POST", "/v1/check", '{"rule":"api",', 400, ""),
    ("POST", "/v1/check", "not json", 400, ""),
    ("POST", "/v1/check", '{"key":"k"}', 400, "rule"),
    ("POST", "/v1/check", '{"rule":"api"}', 400, "key"),
    ("POST", "/v1/check", '{"rule":"api","key":"k","cost":-1}', 400, "cost"),
    ("POST", "/v1/check", '{"rule":"api","key":"k","cost":"1"}', 400, "cost"),
    ("POST", "/v1/check", '{"rule":"nope","key":"k"}', 404, "unknown rule 'nope'"),
    ("GET", "/v1/check?rule=nope&key=k", None, 404, "nope"),
    ("GET", "/v1/check?key=k", None, 400, "rule"),
    ("GET", "/v1/check?rule=api&key=k&cost=abc", None, 400, "cost"),
    ("GET", "/nowhere", None, 404, "/nowhere"),
    ("GET", "/v1", None, 404, ""),
])
def test_error_statuses(start_server, curl, method, path, data, status, fragment):
    server = start_server(CONFIG)
    r = curl(url(server, path), method=method, data=data)
    assert_problem(r, status, fragment)


def test_method_not_allowed(start_server, curl):
    server = start_server(CONFIG)
    r = curl(url(server, "/v1/check"), method="DELETE")
    assert_problem(r, 405)
    assert set(a.strip() for a in r.header("allow").split(",")) == {"GET", "POST"}, r
    for path in ("/healthz", "/metrics", "/v1/rules"):
        r = curl(url(server, path), method="POST", data="{}")
        assert_problem(r, 405)
        assert r.header("allow") == "GET", r


def test_too_large(start_server, curl):
    server = start_server(CONFIG)
    big = '{"rule":"api","key":"' + "x" * 100_000 + '"}'
    # curl waits for the interim answer, so it never sends the body.
    r = curl(url(server, "/v1/check"), data=big, headers={"Expect": "100-continue"})
    assert_problem(r, 413)
    # The same with a raw client that announces the body and sends none.
    raw = raw_exchange(server.http_port, b"POST /v1/check HTTP/1.1\r\nHost: t\r\n"
                       b"Content-Length: 100000\r\n\r\n")
    resp, _ = parse_http_response(raw)
    assert resp.status == 413 and json.loads(resp.body)["detail"], raw
    r = curl(url(server, "/v1/check?rule=api&key=k"), headers={"X-Big": "y" * 10_000})
    assert_problem(r, 431)
    # The server is fine afterwards.
    assert curl(url(server, "/healthz")).status == 200


def raw_exchange(port, data: bytes, timeout=5.0) -> bytes:
    """Sends `data`, then reads until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                return out
            out += chunk
        raise AssertionError(f"connection not closed after {timeout} s; got {out!r}")


@pytest.mark.parametrize("request_bytes", [
    b"GARBAGE\r\n\r\n",
    b"GET /healthz\r\n\r\n",
    b"GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
])
def test_malformed_request_closes(start_server, request_bytes):
    server = start_server(CONFIG)
    raw = raw_exchange(server.http_port, request_bytes)
    resp, rest = parse_http_response(raw)
    assert resp.status == 400, raw
    assert resp.header("content-type").startswith("application/problem+json")
    assert json.loads(resp.body)["detail"]
    assert rest == b"", raw


def test_healthz_rules_metrics(start_server, curl):
    server = start_server(CONFIG)
    r = curl(url(server, "/healthz"))
    assert r.status == 200 and r.json() == {"status": "ok"}, r
    r = curl(url(server, "/v1/rules"))
    assert r.status == 200, r
    rules = r.json()["rules"]
    assert set(rules) == {"api", "three", "multi", "tiered"}, rules
    assert rules["multi"]["algorithm"] == "fixed_window"
    assert len(rules["multi"]["limits"]) == 2
    assert "pro" in rules["tiered"]["tiers"]

    def metrics():
        m = curl(url(server, "/metrics"))
        assert m.status == 200 and m.header("content-type").startswith("text/plain"), m
        return m.body.decode()

    before = metrics()
    base_allowed = metric_value(before, "floodgate_decisions_total",
                                {"rule": "three", "outcome": "allowed"}) or 0
    base_denied = metric_value(before, "floodgate_decisions_total",
                               {"rule": "three", "outcome": "denied"}) or 0
    assert metric_value(before, "floodgate_request_duration_seconds_count") is not None, before
    # Known error kinds are exported from the start, at 0.
    assert metric_value(before, "floodgate_errors_total", {"kind": "protocol"}) == 0, before
    not_found_before = metric_value(before, "floodgate_errors_total", {"kind": "not_found"})
    for _ in range(5):
        curl(url(server, "/v1/check?rule=three&key=m"))
    curl(url(server, "/v1/check?rule=nope&key=m"))
    after = metrics()
    assert metric_value(after, "floodgate_decisions_total",
                        {"rule": "three", "outcome": "allowed"}) == base_allowed + 3, after
    assert metric_value(after, "floodgate_decisions_total",
                        {"rule": "three", "outcome": "denied"}) == base_denied + 2, after
    assert metric_value(after, "floodgate_request_duration_seconds_bucket", {"le": "+Inf"}) == \
        metric_value(after, "floodgate_request_duration_seconds_count")
    assert metric_value(after, "floodgate_errors_total",
                        {"kind": "not_found"}) == not_found_before + 1, after
    assert metric_value(after, "floodgate_connections", {"protocol": "http"}) >= 1, after
    assert metric_value(after, "floodgate_connections", {"protocol": "resp"}) is not None, after
    assert metric_value(after, "floodgate_store_entries") >= 1, after
    assert "# TYPE floodgate_decisions_total counter" in after
    assert "# TYPE floodgate_request_duration_seconds histogram" in after


def read_responses(sock, n, timeout=5.0):
    sock.settimeout(timeout)
    buf = b""
    out = []
    while len(out) < n:
        try:
            resp, rest = parse_http_response(buf)
            out.append(resp)
            buf = rest
            continue
        except AssertionError:
            pass
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {len(out)} of {n} responses; buffered {buf!r}"
        buf += chunk
    return out, buf


def test_keep_alive_and_pipelining(start_server):
    server = start_server(CONFIG)
    get = b"GET /v1/check?rule=api&key=ka HTTP/1.1\r\nHost: t\r\n\r\n"
    body = b'{"rule":"api","key":"ka"}'
    post = (b"POST /v1/check HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as s:
        # Keep-alive: three requests one after another on one connection.
        remaining = []
        for req in (get, post, get):
            s.sendall(req)
            (resp,), rest = read_responses(s, 1)
            assert rest == b""
            assert resp.status == 200, resp
            assert (resp.header("connection") or "").lower() != "close", resp
            remaining.append(json.loads(resp.body)["remaining"])
        assert remaining == [59, 58, 57]
        # Pipelined: four requests in one send, answered in order.
        s.sendall(get + post + b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n" + get)
        resps, rest = read_responses(s, 4)
        assert [r.status for r in resps] == [200, 200, 200, 200]
        assert json.loads(resps[2].body) == {"status": "ok"}
        assert [json.loads(resps[i].body)["remaining"] for i in (0, 1, 3)] == [56, 55, 54]
        # Connection: close is honoured.
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        (resp,), rest = read_responses(s, 1)
        assert resp.status == 200
        s.settimeout(5)
        assert rest + s.recv(100) == b"", "the server must close after Connection: close"


def test_bearer_auth(start_server, curl):
    server = start_server(CONFIG + 'server: { auth_token: "http-token" }\n')
    assert curl(url(server, "/healthz")).status == 200  # no auth needed
    for path in ("/v1/check?rule=api&key=k", "/v1/rules", "/metrics"):
        r = curl(url(server, path))
        assert_problem(r, 401)
        assert r.header("www-authenticate").startswith("Bearer"), r
        r = curl(url(server, path), headers={"Authorization": "Bearer wrong"})
        assert_problem(r, 401)
        r = curl(url(server, path), headers={"Authorization": "Basic aHR0cC10b2tlbg=="})
        assert_problem(r, 401)
        r = curl(url(server, path), headers={"Authorization": "Bearer http-token"})
        assert r.status == 200, r
    r = curl(url(server, "/v1/check"), data='{"rule":"api","key":"k"}',
             headers={"Authorization": "Bearer http-token"})
    assert r.status == 200 and r.json()["remaining"] == 58, r


def histogram_count(curl, server):
    m = curl(url(server, "/metrics")).body.decode()
    return metric_value(m, "floodgate_request_duration_seconds_count")


def test_latency_histogram_keep_alive(start_server, curl):
    """The request-duration histogram observes (possibly sampled) requests
    made on one keep-alive connection."""
    server = start_server(CONFIG)
    before = histogram_count(curl, server)
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as s:
        for _ in range(32):
            s.sendall(b"GET /v1/check?rule=api&key=lat HTTP/1.1\r\nHost: t\r\n\r\n")
            read_responses(s, 1)
    after = histogram_count(curl, server)
    assert 1 <= after - before <= 33, (before, after)


def test_latency_histogram_sees_short_connections(start_server, curl):
    """One request per connection (curl, gateways without keep-alive): the
    histogram must not stay empty however many requests are served."""
    server = start_server(CONFIG)
    before = histogram_count(curl, server)
    for _ in range(4):
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as s:
            for _ in range(4):  # 20 requests in all, none on a connection with more than 4
                s.sendall(b"GET /v1/check?rule=api&key=short HTTP/1.1\r\nHost: t\r\n\r\n")
                read_responses(s, 1)
    for _ in range(4):
        curl(url(server, "/v1/check?rule=api&key=short"))
    after = histogram_count(curl, server)
    assert after > before, (f"20 requests on short connections and "
                            f"floodgate_request_duration_seconds_count is still {after}")


def test_expect_100_continue(start_server):
    """A client that sends "Expect: 100-continue" waits for the interim
    response before sending the body (curl waits 1 s, then sends anyway):
    floodgate must answer it at once."""
    server = start_server(CONFIG)
    body = b'{"rule":"api","key":"expect"}'
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as s:
        s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        s.settimeout(0.5)
        try:
            interim = s.recv(4096)
        except socket.timeout:
            interim = b""
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), \
            f"no '100 Continue' within 0.5 s: got {interim!r}"
        s.settimeout(5)
        s.sendall(body)
        rest = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        (resp,), _ = read_responses_from(s, rest)
        assert resp.status == 200 and json.loads(resp.body)["remaining"] == 59, resp


def test_chunked_body(curl, start_server):
    server = start_server(CONFIG)
    r = curl(url(server, "/v1/check"), data='{"rule":"api","key":"chunked","cost":2}',
             headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"})
    assert r.status == 200 and r.json()["remaining"] == 58, r


def read_responses_from(sock, buf, n=1):
    out = []
    while len(out) < n:
        try:
            resp, buf = parse_http_response(buf)
            out.append(resp)
            continue
        except AssertionError:
            pass
        chunk = sock.recv(65536)
        assert chunk, f"connection closed; buffered {buf!r}"
        buf += chunk
    return out, buf
