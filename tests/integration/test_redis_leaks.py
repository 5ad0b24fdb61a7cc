"""Seed 004: no key of the Redis store ever lives without a TTL, even when
floodgate dies mid-request; `floodgate audit` finds (and --fix repairs) keys
that do, on one server and on every master of a cluster."""

import os
import random
import signal
import subprocess
import threading
import time

import pytest

from conftest import Floodgate, free_port, require_tool

try:
    import redis
except ImportError:  # FAIL, do not skip
    redis = None

CONFIG = """\
rules:
  minute: { algorithm: fixed_window, limits: [20/minute, 100/hour, 500/day] }
  smooth: { algorithm: sliding_window, limits: [30/minute] }
  burst:  { algorithm: token_bucket, limits: [10/minute] }
  cell:   { algorithm: gcra, limits: [10/minute] }
  log:    { algorithm: sliding_log, limits: [5/minute, 20/hour] }
# Every check reaches Redis, however slow the machine: a timed-out one is
# answered by on_backend_error and may write no key for the audit to count.
redis: { timeout_ms: 2000 }
"""


def no_ttl(r):
    return sorted(k for k in r.scan_iter(match="*", count=1000) if r.pttl(k) == -1)


def audit(binary, *args):
    return subprocess.run([str(binary), "audit", *args], capture_output=True, text=True,
                          timeout=60)


def test_sigkill_under_load_never_leaves_a_key_without_ttl(floodgate_bin, tmp_dir, redis_server):
    if redis is None:
        pytest.fail("python3-redis is missing", pytrace=False)
    backend = redis_server()
    config = tmp_dir / "leak.yaml"
    config.write_text(CONFIG)
    rng = random.Random(4)
    rules = ["minute", "smooth", "burst", "cell", "log"]
    kills = 0
    decisions = [0]
    for round_ in range(50):
        server = Floodgate(floodgate_bin, config,
                           ["--store", backend.url, "--resp", "127.0.0.1:0", "--http", "off",
                            "--threads", "2"], dict(os.environ))
        stop = threading.Event()

        def load(seed):
            r = random.Random(seed)
            try:
                c = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=2)
                p = c.pipeline(transaction=False)
                while not stop.is_set():
                    for _ in range(16):
                        p.execute_command("FG.CHECK", r.choice(rules), f"user{r.randrange(200)}",
                                          "COST", r.randrange(1, 3))
                    p.execute(raise_on_error=False)
                    decisions[0] += 16
            except Exception:
                pass  # the server was killed under us: that is the point

        threads = [threading.Thread(target=load, args=(round_ * 10 + i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.02, 0.25))  # a random moment under load
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(5)
        kills += 1
        stop.set()
        for t in threads:
            t.join(5)
    assert kills == 50
    r = backend.client()
    assert decisions[0] > 1000  # there was load to interrupt
    assert r.dbsize() > 0
    assert no_ttl(r) == []
    out = audit(floodgate_bin, "--redis", backend.url)
    assert out.returncode == 0, out.stderr
    assert "0 without a TTL" in out.stderr


def test_audit_finds_and_fixes_planted_keys(floodgate_bin, redis_server):
    backend = redis_server()
    r = backend.client()
    r.set("fg:{api:planted-1}", "x")
    r.set("fg:{api:planted-2}", "y")
    r.set("fg:{api:fine}", "z", px=3_600_000)
    r.set("other:no-ttl", "not ours")  # outside the prefix: left alone
    for i in range(3000):  # enough keys for SCAN to take several pages
        r.set(f"fg:{{bulk:{i}}}", "1", px=600_000)

    out = audit(floodgate_bin, "--redis", backend.url)
    assert out.returncode == 1
    assert sorted(out.stdout.split("\n")[:-1]) == [
        f"no-ttl 127.0.0.1:{backend.port} fg:{{api:planted-1}}",
        f"no-ttl 127.0.0.1:{backend.port} fg:{{api:planted-2}}",
    ]
    assert "scanned 3003 keys" in out.stderr and "2 without a TTL" in out.stderr
    assert r.pttl("fg:{api:planted-1}") == -1  # reported, not changed

    out = audit(floodgate_bin, "--redis", backend.url, "--fix", "--ttl", "120")
    assert out.returncode == 0, out.stderr
    assert "2 given one (120 s)" in out.stderr
    assert 0 < r.pttl("fg:{api:planted-1}") <= 120_000
    # A key with its own TTL keeps it (an hour, far from --ttl's two minutes
    # whatever the audits took on a slow build).
    assert 3_000_000 < r.pttl("fg:{api:fine}") <= 3_600_000
    assert r.pttl("other:no-ttl") == -1

    out = audit(floodgate_bin, "--redis", backend.url, "--prefix", "other:")
    assert out.returncode == 1 and "other:no-ttl" in out.stdout


def test_audit_errors_are_clear(floodgate_bin):
    out = audit(floodgate_bin, "--redis", "redis+proxy://127.0.0.1:1")
    assert out.returncode == 2 and "cannot SCAN" in out.stderr
    out = audit(floodgate_bin, "--redis", "redis://127.0.0.1")
    assert out.returncode == 2 and "port" in out.stderr
    out = audit(floodgate_bin, "--redis", f"redis://127.0.0.1:{free_port()}")
    assert out.returncode == 2 and "cannot reach" in out.stderr or "failed" in out.stderr


@pytest.fixture
def cluster(tmp_dir):
    """Three masters, created with redis-cli --cluster create."""
    server_bin = require_tool("redis-server", "redis-server")
    cli = require_tool("redis-cli", "redis-tools")
    procs, ports = [], []
    for i in range(3):
        port = free_port()
        d = tmp_dir / f"cluster-{i}"
        d.mkdir()
        procs.append(subprocess.Popen(
            # The bus port explicitly: the default, port + 10000, may be taken or past 65535.
            [server_bin, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-port", str(free_port()),
             "--cluster-config-file", str(d / "nodes.conf"), "--save", "", "--appendonly", "no",
             "--dir", str(d), "--logfile", str(d / "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ports.append(port)
    try:
        for port in ports:
            deadline = time.monotonic() + 10
            while subprocess.run([cli, "-p", str(port), "ping"], capture_output=True,
                                 text=True).stdout.strip() != "PONG":
                assert time.monotonic() < deadline, f"redis-server {port} did not start"
                time.sleep(0.05)
        out = subprocess.run([cli, "--cluster", "create",
                              *[f"127.0.0.1:{p}" for p in ports],
                              "--cluster-replicas", "0", "--cluster-yes"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        deadline = time.monotonic() + 15
        while "cluster_state:ok" not in subprocess.run(
                [cli, "-p", str(ports[0]), "cluster", "info"], capture_output=True,
                text=True).stdout:
            assert time.monotonic() < deadline, "cluster did not become ok"
            time.sleep(0.1)
        yield ports
    finally:
        for p in procs:
            p.kill()
            p.wait(5)


def test_audit_scans_every_master_of_a_cluster(floodgate_bin, start_server, cluster):
    if redis is None:
        pytest.fail("python3-redis is missing", pytrace=False)
    from redis.cluster import RedisCluster, ClusterNode
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in cluster])
    planted = [f"fg:{{api:planted-{i}}}" for i in range(30)]  # spread over the slots
    for k in planted:
        rc.set(k, "x")
    holders = {rc.get_node_from_key(k).port for k in planted}
    assert len(holders) == 3  # the test plants on every master

    url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in cluster[:1])
    # floodgate itself on the cluster: its keys all carry a TTL.
    server = start_server(CONFIG, extra_args=["--store", url])
    c = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=10)
    for i in range(60):
        assert c.execute_command("FG.CHECK", "minute", f"user{i}")[0] == 1

    out = audit(floodgate_bin, "--redis", url)
    assert out.returncode == 1, out.stderr
    found = sorted(line.split(" ", 2)[2] for line in out.stdout.splitlines())
    assert found == sorted(planted)
    assert "on 3 nodes" in out.stderr and "scanned 90 keys" in out.stderr

    out = audit(floodgate_bin, "--redis", url, "--fix")
    assert out.returncode == 0, out.stderr
    assert all(rc.ttl(k) > 0 for k in planted)
    assert audit(floodgate_bin, "--redis", url).returncode == 0
