"""redis-benchmark against the RESP front: it must run to the end, and every
FG.CHECK it sent must be counted (bounded load, 127.0.0.1 only)."""

import subprocess
import time

import pytest

from conftest import RespConn, avoid_window_edge, metric_value, require_tool

CONFIG = """\
rules:
  bench: { algorithm: fixed_window, limits: [1000000000/hour] }
"""

N = 20_000


@pytest.fixture(scope="module")
def redis_benchmark():
    return require_tool("redis-benchmark", "redis-tools")


def bench(binary, port, *args):
    cmd = [binary, "-h", "127.0.0.1", "-p", str(port), "-c", "10", "-n", str(N), "-q", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{cmd} exited {out.returncode}:\n{text}"
    assert "requests per second" in text, f"{cmd}:\n{text}"
    assert "ERR" not in out.stdout, f"{cmd}: error replies:\n{text}"
    return text


def test_redis_benchmark(start_server, redis_benchmark, curl):
    server = start_server(CONFIG, threads=2)
    port = server.resp_port
    avoid_window_edge(3600, 30)
    bench(redis_benchmark, port, "-r", "1000", "FG.CHECK", "bench", "key:__rand_int__")
    bench(redis_benchmark, port, "-r", "1000", "-P", "16", "CL.THROTTLE", "cell:__rand_int__",
          "1000", "1000", "1")
    bench(redis_benchmark, port, "-P", "16", "-t", "ping")

    m = curl(f"http://127.0.0.1:{server.http_port}/metrics").body.decode()
    allowed = metric_value(m, "floodgate_decisions_total", {"rule": "bench", "outcome": "allowed"})
    denied = metric_value(m, "floodgate_decisions_total", {"rule": "bench", "outcome": "denied"})
    assert allowed == N and denied == 0, m
    throttles = sum(metric_value(m, "floodgate_decisions_total",
                                 {"rule": "CL.THROTTLE", "outcome": o}) or 0
                    for o in ("allowed", "denied"))
    assert throttles == N, m
    # Every key is in the store (-r 1000: at most 1000 bench keys + 1000 cell keys).
    entries = metric_value(m, "floodgate_store_entries")
    assert 900 <= entries <= 2000, m
    # The counter a benchmark key sees is the number of hits it got.
    with RespConn(port) as c:
        total = 0
        for i in range(1000):
            d = c.command("FG.CHECK", "bench", f"key:{i:012d}", "COST", 0)
            total += 1_000_000_000 - d[2]
        assert total == N
        assert c.command("PING") == "PONG"
    # Connections opened by the benchmark are all closed again.
    deadline = time.monotonic() + 3
    while True:
        m = curl(f"http://127.0.0.1:{server.http_port}/metrics").body.decode()
        if metric_value(m, "floodgate_connections", {"protocol": "resp"}) == 0:
            break
        assert time.monotonic() < deadline, m
        time.sleep(0.1)
