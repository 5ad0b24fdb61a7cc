"""A Redis store behind Redis Sentinel (redis-sentinel://…/mymaster), with
real processes: a master, a replica and three of Debian's redis-sentinel.
floodgate finds the master through the sentinels, follows a failover when
the master is SIGKILLed (answers meanwhile are the rule's on_backend_error
fallbacks, marked), never writes to the old master when it returns as a
replica, and leaves no key without a TTL. Bad sentinel URLs and a wrong
master name stop the start with a message naming the part at fault."""

import os
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
# A file to append each failover's figures to: seconds from the SIGKILL to
# +switch-master, from it to floodgate's first decision at the new master,
# and the fallbacks answered meanwhile.
FIGURES = os.environ.get("FLOODGATE_SENTINEL_FIGURES")
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
    """sentinels(count=3, replica=True) -> (master, replica or None, [sentinel, ...]):
    a master, a replica of it, and `count` sentinels that know both and (when
    there are several, so that they can fail over) each other. A lone
    sentinel never reaches the quorum of 2: it names the master and never
    fails over."""
    started = []

    def make(count: int = 3, replica: bool = True):
        master = RedisServer(tmp_dir / "master")
        started.append(master)
        second = None
        if replica:
            second = RedisServer(tmp_dir / "replica")
            started.append(second)
            client(second.port).replicaof("127.0.0.1", master.port)
            until(lambda: client(second.port).info("replication")["master_link_status"] == "up",
                  10, "the replica to sync")
        group = []
        for i in range(count):
            group.append(Sentinel(tmp_dir / f"sentinel-{i}", master.port))
            started.append(group[-1])

        def agreed():
            for s in group:
                c = client(s.port)
                if len(c.execute_command("SENTINEL", "SENTINELS", MASTER)) != count - 1:
                    return False
                if len(c.execute_command("SENTINEL", "REPLICAS", MASTER)) != int(replica):
                    return False
            return True

        until(agreed, 20, "the sentinels to know each other and the replica")
        return master, second, group

    yield make
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

    def first_fallback_after(self, t: float) -> float | None:
        for at, reason in list(self.answers):
            if at > t and reason == b"backend_error":
                return at
        return None

    def first_decided_after(self, t: float) -> float | None:
        for at, reason in list(self.answers):
            if at > t and reason == b"":
                return at
        return None


def test_follows_a_failover_and_never_writes_to_the_old_master(floodgate_bin, start_server,
                                                               sentinels):
    master, replica, group = sentinels()
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

        # While no master answered: the rule's fallback, marked, never an
        # error; then decisions again, from the new master, within 1 s of the
        # announcement (floodgate may hear it from another sentinel first).
        outage = load.first_fallback_after(killed_at)
        assert outage is not None, "no fallback while the master was down"
        until(lambda: load.first_decided_after(outage) is not None, 5,
              "a decision after the failover")
        back = load.first_decided_after(outage)
        assert back - switched_at <= 1.0, \
            f"followed the new master {back - switched_at:.2f} s after +switch-master"
        if FIGURES:  # docs/benchmarks.md, "Redis Sentinel: following a failover"
            with open(FIGURES, "a") as f:
                f.write(f"{switched_at - killed_at:.3f} {back - switched_at:.3f} "
                        f"{len([1 for at, r in load.answers if outage <= at < back])}\n")
        assert load.errors == []
        assert client(replica.port).info("replication")["role"] == "master"

        # The old master comes back (empty: no persistence), at first still
        # calling itself a master: floodgate, following the sentinels, sends
        # it nothing.
        master.start()  # the same port
        time.sleep(2.0)  # the load goes on meanwhile
        assert "cmdstat_evalsha" not in client(master.port).info("commandstats")
        # Then the sentinels make it a replica of the new master. A sentinel
        # waits to see it report itself master for a while (its INFO every
        # 10 s, then a grace of 8 s) and has been seen to take longer on a
        # busy host; past 40 s the test does what they would (REPLICAOF the
        # new master): what is under test is floodgate's side, which must
        # send nothing either way.
        deadline = time.monotonic() + 40
        while (client(master.port).info("replication")["role"] != "slave"
               and time.monotonic() < deadline):
            time.sleep(0.1)
        if client(master.port).info("replication")["role"] != "slave":
            client(master.port).execute_command("REPLICAOF", "127.0.0.1", str(replica.port))
            until(lambda: client(master.port).info("replication")["role"] == "slave", 10,
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


def test_a_demoted_master_is_left_at_once(start_server, sentinels):
    """SENTINEL FAILOVER demotes the master under floodgate's open
    connections: what it refuses (READONLY) is a marked fallback, not an
    error reply, and decisions go on at the promoted replica."""
    master, replica, group = sentinels()
    server = start_server(CONFIG, extra_args=["--store", sentinel_url(group)])
    load = Load(server.resp_port)
    try:
        until(lambda: load.first_decided_after(0) is not None, 5, "a first decision")
        started = time.monotonic()
        assert client(group[0].port).execute_command("SENTINEL", "FAILOVER", MASTER) == b"OK"
        until(lambda: client(replica.port).info("replication")["role"] == "master", 20,
              "the replica to be promoted")
        until(lambda: client(master.port).info("replication")["role"] == "slave", 20,
              "the master to be demoted")
        promoted = time.monotonic()
        until(lambda: load.first_decided_after(promoted) is not None, 5,
              "a decision after the failover")
        assert load.errors == []
        reasons = {r for at, r in load.answers if at > started}
        assert reasons <= {b"", b"backend_error"}, reasons
        # Counted where the sentinels now say the master is.
        reply = client(server.resp_port).execute_command("FG.CHECK", "api", "after", "VERBOSE")
        assert reply[5] == b"", reply
        assert client(replica.port).pttl("fg:{api:after}") > 0
    finally:
        load.stop()
    assert server.wait_for("redis sentinel: following a new master", 5) is not None


def test_a_master_made_a_replica_behind_the_sentinels_back_is_not_used(start_server, sentinels):
    """The server the sentinels name turns replica on its own (REPLICAOF by
    hand): its READONLY replies on open connections, and ROLE on new ones,
    make every answer a marked fallback, never an error reply, until it is
    a master again."""
    master, replica, group = sentinels(count=1)
    server = start_server(CONFIG, extra_args=["--store", sentinel_url(group)])
    c = client(server.resp_port)
    assert c.execute_command("FG.CHECK", "api", "warm", "VERBOSE")[5] == b""
    m = client(master.port)
    client(replica.port).replicaof("NO", "ONE")
    m.replicaof("127.0.0.1", replica.port)
    try:
        reasons = [c.execute_command("FG.CHECK", "api", f"k{i}", "VERBOSE")[5] for i in range(200)]
        assert set(reasons) == {b"backend_error"}, set(reasons)
        assert "errorstat_READONLY" in m.info("errorstats")  # refused there, not passed on
        # A server started now connects, asks ROLE, and sends it nothing more.
        def evalsha_calls() -> int:
            return m.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)

        before = evalsha_calls()
        late = start_server(CONFIG, extra_args=["--store", sentinel_url(group)])
        lc = client(late.resp_port)
        reasons = [lc.execute_command("FG.CHECK", "api", f"k{i}", "VERBOSE")[5] for i in range(50)]
        assert set(reasons) == {b"backend_error"}, set(reasons)
        assert late.wait_for("not the master \\(ROLE: slave\\)", 5) is not None, late.stderr_text()
        assert evalsha_calls() == before
    finally:
        m.replicaof("NO", "ONE")
        client(replica.port).replicaof("127.0.0.1", master.port)
    until(lambda: c.execute_command("FG.CHECK", "api", "again", "VERBOSE")[5] == b"", 5,
          "decisions at the master again")


def test_readyz_says_why_while_there_is_no_master(start_server, sentinels):
    master, _, group = sentinels(count=1, replica=False)
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

    # The sentinels gone too: asked again on every failed connection (at
    # most every 100 ms), said in the log at most once a second.
    group[0].stop()
    mark = server.line_count()
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        assert c.execute_command("FG.CHECK", "api", "u", "VERBOSE")[5] == b"backend_error"
        time.sleep(0.01)
    said = [l for l in server.lines[mark:] if "redis sentinel: no master" in l]
    assert 1 <= len(said) <= 3, "\n".join(said)


BAD_URLS = [
    ("redis-sentinel://127.0.0.1:{dead}/mymaster", "no sentinel answered for master 'mymaster'"),
    ("redis-sentinel://127.0.0.1:{sentinel}/othermaster",
     "no sentinel knows a master named 'othermaster'"),
    ("redis-sentinel://127.0.0.1:{sentinel}", "needs the master's name after the sentinels"),
    ("redis-sentinel://127.0.0.1:{sentinel}/mymaster?db=x", "bad database number 'x'"),
]


def test_bad_sentinel_urls_stop_the_start(floodgate_bin, tmp_dir, sentinels):
    _, _, group = sentinels(count=1, replica=False)
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
