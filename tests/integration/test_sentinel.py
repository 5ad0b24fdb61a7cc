"""A Redis store behind Redis Sentinel (redis-sentinel://…/mymaster), with
real processes: a master, a replica and three of Debian's redis-sentinel.
floodgate finds the master through the sentinels, follows a failover when
the master is SIGKILLed (answers meanwhile are the rule's on_backend_error
fallbacks, marked), never writes to the old master when it returns as a
replica, and leaves no key without a TTL. Bad sentinel URLs and a wrong
master name stop the start with a message naming the part at fault."""

import subprocess
import threading
import time

import pytest

from conftest import RedisServer, free_port, require_tool, until

try:
    import redis
except ImportError:  # FAIL, do not skip: the client is part of the contract
    redis = None

MASTER = "mymaster"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000

CONFIG = """\
rules:
  api: { algorithm: fixed_window, limits: [1000000/minute], on_backend_error: allow }
"""


def client(port: int):
    if redis is None:
        pytest.fail("the Python 'redis' module is missing: apt-get install -y python3-redis",
                    pytrace=False)
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


class Sentinel:
    """One redis-sentinel process watching MASTER, with the failover timings
    short enough for a test (down after 1 s)."""

    def __init__(self, directory, master_port: int):
        self.binary = require_tool("redis-sentinel", "redis-sentinel")
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = directory / "sentinel.conf"
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndaemonize no\ndir {directory}\n"
            f"logfile {directory / 'log'}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {master_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n")
        self.proc = subprocess.Popen([self.binary, str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        until(lambda: self._answers(), 10, f"redis-sentinel on {self.port} to answer")

    def _answers(self) -> bool:
        try:
            return client(self.port).ping()
        except (redis.exceptions.ConnectionError, OSError):
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def sentinels(tmp_dir):
    """A master, one replica of it, and three sentinels that know both and
    each other: (master, replica, [sentinel, ...])."""
    master = RedisServer(tmp_dir / "master")
    replica = RedisServer(tmp_dir / "replica")
    started = [master, replica]
    try:
        client(replica.port).replicaof("127.0.0.1", master.port)
        until(lambda: client(replica.port).info("replication")["master_link_status"] == "up",
              10, "the replica to sync")
        group = []
        for i in range(3):
            group.append(Sentinel(tmp_dir / f"sentinel-{i}", master.port))
            started.append(group[-1])

        def agreed():
            for s in group:
                c = client(s.port)
                if len(c.execute_command("SENTINEL", "SENTINELS", MASTER)) != 2:
                    return False
                if len(c.execute_command("SENTINEL", "REPLICAS", MASTER)) != 1:
                    return False
            return True

        until(agreed, 20, "the sentinels to know each other and the replica")
        yield master, replica, group
    finally:
        for p in reversed(started):
            p.stop()


def sentinel_url(group, master: str = MASTER) -> str:
    return "redis-sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in group) + "/" + master


class Load:
    """FG.CHECK api <key> VERBOSE from a thread, one at a time: each answer's
    time and its fallback reason (b"" for a decision the store made)."""

    def __init__(self, port: int):
        self.c = client(port)
        self.answers: list[tuple[float, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                reply = self.c.execute_command("FG.CHECK", "api", f"user:{i % 500}", "VERBOSE")
                self.answers.append((time.monotonic(), reply[5]))
            except Exception as e:  # an error is not a decision: the test fails on it
                self.errors.append(repr(e))
            time.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def first_decided_after(self, t: float) -> float | None:
        for at, reason in list(self.answers):
            if at > t and reason == b"":
                return at
        return None


def test_follows_a_failover_and_never_writes_to_the_old_master(floodgate_bin, start_server,
                                                               sentinels):
    master, replica, group = sentinels
    server = start_server(CONFIG, extra_args=["--store", sentinel_url(group)])
    load = Load(server.resp_port)
    try:
        until(lambda: load.first_decided_after(0) is not None, 5, "a first decision")
        assert client(master.port).dbsize() > 0  # the master the sentinels named holds them

        # Hear the failover as the sentinels announce it.
        pubsub = client(group[0].port).pubsub()
        pubsub.subscribe("+switch-master")
        pubsub.get_message(timeout=2)  # the subscription's confirmation
        killed_at = time.monotonic()
        master.stop()  # SIGKILL
        switched_at = None
        deadline = killed_at + DOWN_AFTER_MS / 1000 + FAILOVER_TIMEOUT_MS / 1000 + 20
        while switched_at is None and time.monotonic() < deadline:
            m = pubsub.get_message(timeout=1)
            if m and m["type"] == "message" and m["data"].split()[0] == MASTER.encode():
                switched_at = time.monotonic()
                assert m["data"].split()[4] == str(replica.port).encode(), m
        pubsub.close()
        assert switched_at is not None, "the sentinels did not fail over"

        until(lambda: load.first_decided_after(switched_at) is not None, 5,
              "a decision after the failover")
        followed = load.first_decided_after(switched_at) - switched_at
        assert followed <= 1.0, f"followed the new master {followed:.2f} s after +switch-master"
        # While no master answered: marked fallbacks, never an error.
        between = [r for at, r in load.answers if killed_at + 0.2 < at < switched_at]
        assert between and set(between) == {b"backend_error"}, set(between)
        assert load.errors == []
        assert client(replica.port).info("replication")["role"] == "master"

        # The old master comes back (empty: no persistence) and the sentinels
        # make it a replica of the new one; floodgate sends it nothing.
        master.start()  # the same port
        until(lambda: client(master.port).info("replication")["role"] == "slave", 20,
              "the old master to be made a replica")
        time.sleep(1.0)  # the load goes on meanwhile
        stats = client(master.port).info("commandstats")
        assert "cmdstat_evalsha" not in stats and "cmdstat_eval" not in stats, stats
        assert "errorstat_READONLY" not in client(master.port).info("errorstats")
        assert load.errors == []
    finally:
        load.stop()

    # Every key floodgate wrote has an expiry.
    out = subprocess.run([str(floodgate_bin), "audit", "--redis", sentinel_url(group)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 without a TTL" in out.stderr, out.stderr
    assert client(replica.port).dbsize() > 0


def test_readyz_says_why_while_there_is_no_master(start_server, sentinels):
    master, _, group = sentinels
    server = start_server(CONFIG, extra_args=["--store", sentinel_url(group)])
    c = client(server.resp_port)
    assert c.execute_command("FG.CHECK", "api", "u", "VERBOSE")[5] == b""
    master.stop()

    def unready():
        c.execute_command("FG.CHECK", "api", "u")  # traffic opens the circuit
        out = subprocess.run(["curl", "-s", f"http://127.0.0.1:{server.http_port}/readyz"],
                             capture_output=True, text=True, timeout=5)
        return "waiting for them to follow a failover" in out.stdout and out.stdout

    body = until(unready, 5, "/readyz to say the master is gone")
    assert f"127.0.0.1:{master.port}" in body and MASTER in body, body


BAD_URLS = [
    ("redis-sentinel://127.0.0.1:{dead}/mymaster", "no sentinel answered for master 'mymaster'"),
    ("redis-sentinel://127.0.0.1:{sentinel}/othermaster",
     "no sentinel knows a master named 'othermaster'"),
    ("redis-sentinel://127.0.0.1:{sentinel}", "needs the master's name after the sentinels"),
    ("redis-sentinel://127.0.0.1:{sentinel}/mymaster?db=x", "bad database number 'x'"),
]


def test_bad_sentinel_urls_stop_the_start(floodgate_bin, tmp_dir, sentinels):
    _, _, group = sentinels
    config = tmp_dir / "bad.yaml"
    config.write_text(CONFIG)
    for url, message in BAD_URLS:
        url = url.format(dead=free_port(), sentinel=group[0].port)
        out = subprocess.run([str(floodgate_bin), "serve", "--config", str(config), "--store", url,
                              "--resp", "127.0.0.1:0", "--http", "127.0.0.1:0"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0, (url, out.stderr)
        assert message in out.stderr, (url, out.stderr)
        assert "msg=listening" not in out.stderr, (url, out.stderr)
