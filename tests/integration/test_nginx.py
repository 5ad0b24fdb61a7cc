"""examples/nginx: nginx's auth_request asks floodgate (GET /v1/check) before
serving each page; the 6th page view in a minute is answered 429."""

import re

from conftest import SOURCE_DIR, avoid_window_edge

EXAMPLE = SOURCE_DIR / "examples" / "nginx"


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


def test_nginx_auth_request(start_server, nginx, curl):
    config = (EXAMPLE / "floodgate.yaml").read_text()
    # The example's listen: addresses are overridden by --resp/--http port 0.
    server = start_server(config)
    port, stop_nginx = nginx(lambda p, prefix: render_conf(server.http_port, p, prefix))
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
