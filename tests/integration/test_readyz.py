"""GET /readyz beside /healthz: 200 {"status":"ready"} once the rules are
loaded and the store is reachable; 503 with a JSON reason while the Redis
circuit is open; /healthz stays 200 (the process serves) throughout."""

import json
import socket
import time
import urllib.error
import urllib.request

CONFIG = """\
redis: { timeout_ms: 50 }
rules:
  api: { algorithm: fixed_window, limits: [1000/hour], on_backend_error: allow }
"""


def get(server, path, method="GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as f:
            return f.status, f.headers, f.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def check(server):
    """One FG.CHECK over RESP (a failing one counts towards the circuit)."""
    with socket.create_connection(("127.0.0.1", server.resp_port), timeout=5) as s:
        s.sendall(b"*3\r\n$8\r\nFG.CHECK\r\n$3\r\napi\r\n$5\r\nalice\r\n")
        buf = b""
        while buf.count(b"\r\n") < 6:
            chunk = s.recv(4096)
            assert chunk, "floodgate closed the connection"
            buf += chunk


def wait_for_status(server, status, seconds):
    """Polls /readyz (sending a check between polls) until it answers
    `status`; returns (status, headers, body) and how long it took."""
    start = time.monotonic()
    while True:
        got = get(server, "/readyz")
        if got[0] == status or time.monotonic() - start > seconds:
            return got, time.monotonic() - start
        check(server)
        time.sleep(0.05)


def test_readyz_on_the_embedded_store(start_server):
    server = start_server(CONFIG)
    status, headers, body = get(server, "/readyz")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"status": "ready"}
    status, headers, body = get(server, "/readyz", method="HEAD")
    assert status == 200 and body == b""
    status, headers, _ = get(server, "/readyz", method="POST")
    assert status == 405 and headers["Allow"] == "GET"


def test_readyz_follows_the_redis_circuit(start_server, redis_server):
    backend = redis_server()
    server = start_server(CONFIG, threads=2, extra_args=["--store", backend.url])
    check(server)
    (status, _, body), _ = wait_for_status(server, 200, 2.0)
    assert status == 200 and json.loads(body) == {"status": "ready"}

    backend.stop()
    (status, headers, body), took = wait_for_status(server, 503, 3.0)
    assert status == 503, f"/readyz still {status} {took:.1f} s after Redis stopped: {body!r}"
    assert took < 2.0, f"/readyz took {took:.1f} s to report Redis down"
    assert headers["Content-Type"] == "application/json"
    doc = json.loads(body)
    assert doc == {"status": "unavailable",
                   "reason": f"redis circuit open for 127.0.0.1:{backend.port}"}, doc
    assert get(server, "/readyz", method="HEAD")[0] == 503
    assert get(server, "/healthz")[0] == 200  # alive all along

    backend.start()  # same port
    (status, _, body), took = wait_for_status(server, 200, 3.0)
    assert status == 200, f"/readyz still {status} {took:.1f} s after Redis came back: {body!r}"
    assert took < 2.0, f"/readyz took {took:.1f} s to report Redis back"
