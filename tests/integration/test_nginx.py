"""examples/nginx: nginx's auth_request asks floodgate (GET /v1/check) before
serving each page; the 6th page view in a minute is answered 429."""

import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import SOURCE_DIR, avoid_window_edge, require_tool

EXAMPLE = SOURCE_DIR / "examples" / "nginx"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def render_conf(floodgate_http_port: int, listen_port: int, tmp) -> str:
    conf = (EXAMPLE / "nginx.conf").read_text()
    replacements = [
        (r"server 127\.0\.0\.1:8080;", f"server 127.0.0.1:{floodgate_http_port};"),
        (r"listen 127\.0\.0\.1:8000;", f"listen 127.0.0.1:{listen_port};"),
        (r"root site;", f"root {EXAMPLE / 'site'};"),
        (r"/tmp/floodgate-nginx-", f"{tmp}/nginx-"),
    ]
    for pattern, repl in replacements:
        conf, n = re.subn(pattern, repl, conf)
        assert n >= 1, f"examples/nginx/nginx.conf no longer contains {pattern!r}"
    return conf


@pytest.fixture
def nginx_bin():
    return require_tool("nginx", "nginx-light")


def test_nginx_auth_request(start_server, tmp_dir, nginx_bin, curl):
    config = (EXAMPLE / "floodgate.yaml").read_text()
    # The example's listen: addresses are overridden by --resp/--http port 0.
    server = start_server(config)
    proc = None
    for _attempt in range(3):  # the free port may be taken between probe and bind
        port = free_port()
        (tmp_dir / "nginx.conf").write_text(render_conf(server.http_port, port, tmp_dir))
        proc = subprocess.Popen([nginx_bin, "-p", str(tmp_dir), "-c", str(tmp_dir / "nginx.conf"),
                                 "-g", "master_process off;"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        if wait_port(port, proc):
            break
        proc.kill()
        out, err = proc.communicate(timeout=5)
        proc = None
    assert proc is not None, f"nginx did not start: {err.decode(errors='replace')}"
    def stop_nginx() -> str:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        text = proc.stderr.read().decode(errors="replace")
        proc.stdout.close()
        proc.stderr.close()
        return text

    try:
        avoid_window_edge(60, 5)
        page = (EXAMPLE / "site" / "index.html").read_bytes()
        for i in range(5):
            r = curl(f"http://127.0.0.1:{port}/")
            assert r.status == 200, (i, r)
            assert r.body == page
            assert r.header("ratelimit-policy") == '"web";q=5;w=60', r
            assert r.header("ratelimit").startswith(f'"web";r={4 - i};t='), r
        r = curl(f"http://127.0.0.1:{port}/")
        assert r.status == 429, r
        assert b"Too Many Requests" in r.body
        retry_after = r.header("retry-after")
        # sliding_window: a full current bucket must slide through the next one,
        # so a wait can reach two periods.
        assert retry_after is not None and 1 <= int(retry_after) <= 120, r
        assert r.header("ratelimit").startswith('"web";r=0;t='), r
        # floodgate saw exactly those six decisions.
        m = curl(f"http://127.0.0.1:{server.http_port}/metrics").body.decode()
        assert 'floodgate_decisions_total{rule="web",outcome="allowed"} 5' in m, m
        assert 'floodgate_decisions_total{rule="web",outcome="denied"} 1' in m, m
    except AssertionError as e:
        raise AssertionError(f"{e}\nnginx stderr:\n{stop_nginx()}\n"
                             f"floodgate stderr:\n{server.stderr_text()}") from None
    err = stop_nginx()
    assert "[emerg]" not in err and "[crit]" not in err, err
