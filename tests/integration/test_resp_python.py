"""The RESP front driven by redis-py (Debian's python3-redis)."""

import threading

import pytest

from conftest import avoid_window_edge

try:
    import redis
except ImportError:  # FAIL, do not skip: the client is part of the contract
    redis = None

CONFIG = """\
rules:
  api:      { algorithm: sliding_log, limits: [60/minute] }
  forty:    { algorithm: token_bucket, limits: [40/hour] }
  tiered:   { algorithm: fixed_window, limits: [2/hour], tiers: { pro: [10/hour] } }
  costly:   { algorithm: sliding_log, limits: [10/hour] }
  hourly:   { algorithm: fixed_window, limits: [1000/hour] }
  gcra:     { algorithm: gcra, limits: [5/hour] }
  shadowed: { algorithm: fixed_window, limits: [1/hour], shadow: true }
"""


@pytest.fixture
def client_for():
    if redis is None:
        pytest.fail("the Python 'redis' module is missing: apt-get install -y python3-redis "
                    "(and run the tests with /usr/bin/python3)", pytrace=False)
    clients = []

    def make(port, **kw):
        c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def check(r, *args):
    return [int(x) for x in r.execute_command("FG.CHECK", *args)]


def test_execute_command(start_server, client_for):
    server = start_server(CONFIG)
    r = client_for(server.resp_port)
    assert r.ping() is True
    allowed, limit, remaining, retry, reset = check(r, "api", "user:42")
    assert (allowed, limit, remaining, retry) == (1, 60, 59, 0)
    assert 0 < reset <= 60_000
    assert check(r, "api", "user:42")[:3] == [1, 60, 58]
    assert r.echo("héllo") == "héllo".encode()
    info = r.info()
    assert "redis_version" in info and info["loading"] == 0, info
    with pytest.raises(redis.ResponseError, match="unknown rule 'nope'"):
        r.execute_command("FG.CHECK", "nope", "k")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'fg.check'"):
        r.execute_command("FG.CHECK", "api")
    # Binary keys are byte strings like any other.
    assert check(r, "api", b"\x00\xff\r\nkey")[:3] == [1, 60, 59]
    assert r.client_setname("py-client") is True
    assert r.client_getname() == "py-client"


def test_pipeline_exact_count(start_server, client_for):
    server = start_server(CONFIG)
    r = client_for(server.resp_port)
    pipe = r.pipeline(transaction=False)
    for _ in range(100):
        pipe.execute_command("FG.CHECK", "forty", "k")
    results = pipe.execute()
    assert len(results) == 100
    allowed = [int(x[0]) for x in results]
    assert sum(allowed) == 40, allowed
    assert allowed == [1] * 40 + [0] * 60  # in order
    assert [int(x[2]) for x in results[:40]] == list(range(39, -1, -1))
    assert all(int(x[3]) > 0 for x in results[40:])


def test_tiers(start_server, client_for):
    server = start_server(CONFIG)
    r = client_for(server.resp_port)
    avoid_window_edge(3600, 5)
    assert [check(r, "tiered", "free-user")[0] for _ in range(3)] == [1, 1, 0]
    res = [check(r, "tiered", "pro-user", "TIER", "pro") for _ in range(11)]
    assert [x[0] for x in res] == [1] * 10 + [0]
    assert res[0][1] == 10 and res[0][2] == 9
    assert check(r, "tiered", "pro-user", "tier", "pro")[:3] == [0, 10, 0]  # options ignore case
    with pytest.raises(redis.ResponseError, match="tier"):
        r.execute_command("FG.CHECK", "tiered", "k", "TIER", "platinum")


def test_cost_and_peek(start_server, client_for):
    server = start_server(CONFIG)
    r = client_for(server.resp_port)
    assert check(r, "costly", "k", "COST", 3)[:3] == [1, 10, 7]
    assert check(r, "costly", "k", "COST", 0)[:3] == [1, 10, 7]  # peek
    assert check(r, "costly", "k", "COST", 7)[:3] == [1, 10, 0]
    d = check(r, "costly", "k", "COST", 1)
    assert d[:3] == [0, 10, 0] and d[3] > 0
    # More than the limit can ever hold: denied, and never (-1).
    d = check(r, "costly", "other", "COST", 11)
    assert d[0] == 0 and d[3] == -1, d
    assert check(r, "costly", "other")[:3] == [1, 10, 9]  # the denial consumed nothing


def test_reset(start_server, client_for):
    server = start_server(CONFIG)
    r = client_for(server.resp_port)
    for _ in range(5):
        check(r, "gcra", "k")
    assert check(r, "gcra", "k")[0] == 0
    assert r.execute_command("FG.RESET", "gcra", "k") in (b"OK", "OK", True)
    assert check(r, "gcra", "k")[:3] == [1, 5, 4]
    # Resetting an unknown key is fine; an unknown rule is not.
    assert r.execute_command("FG.RESET", "gcra", "never-seen") in (b"OK", "OK", True)
    with pytest.raises(redis.ResponseError, match="unknown rule"):
        r.execute_command("FG.RESET", "nope", "k")


def test_shadow_rule_admits_but_counts(start_server, client_for):
    server = start_server(CONFIG)
    r = client_for(server.resp_port)
    avoid_window_edge(3600, 5)
    first = check(r, "shadowed", "k")
    second = check(r, "shadowed", "k")
    assert first[0] == 1 and second[0] == 1
    assert first[2] == 0 and second[2] == 0


def test_auth(start_server, client_for):
    server = start_server(CONFIG + 'server: { auth_token: "py-token" }\n')
    anon = client_for(server.resp_port)
    with pytest.raises(redis.exceptions.AuthenticationError):
        anon.execute_command("FG.CHECK", "api", "k")
    wrong = client_for(server.resp_port, password="nope")
    # redis-py 4.3 raises WRONGPASS as a ResponseError, later ones as
    # AuthenticationError: either way, with Redis's own text.
    with pytest.raises((redis.exceptions.AuthenticationError, redis.ResponseError),
                       match="WRONGPASS"):
        wrong.ping()
    ok = client_for(server.resp_port, password="py-token")
    assert check(ok, "api", "k")[:3] == [1, 60, 59]
    acl = client_for(server.resp_port, username="default", password="py-token")
    assert check(acl, "api", "k")[:3] == [1, 60, 58]


def test_auth_token_from_env(start_server, client_for):
    server = start_server(CONFIG + "server: { auth_token_env: FG_ITEST_TOKEN }\n",
                          env={"FG_ITEST_TOKEN": "from-env"})
    ok = client_for(server.resp_port, password="from-env")
    assert check(ok, "api", "k")[0] == 1
    wrong = client_for(server.resp_port, password="py-token")
    with pytest.raises((redis.exceptions.AuthenticationError, redis.ResponseError),
                       match="WRONGPASS"):
        wrong.ping()


def test_concurrent_clients_exact(start_server, client_for):
    server = start_server(CONFIG, threads=2)
    avoid_window_edge(3600, 10)
    threads_n, per_thread = 8, 200
    counts = [0] * threads_n
    errors = []
    barrier = threading.Barrier(threads_n)

    def worker(i):
        try:
            r = client_for(server.resp_port)
            r.ping()
            barrier.wait(timeout=10)
            for _ in range(per_thread):
                counts[i] += int(r.execute_command("FG.CHECK", "hourly", "shared-key")[0])
        except Exception as e:  # surfaced below
            errors.append(repr(e))

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads_n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not errors, errors
    assert sum(counts) == 1000, counts
    r = client_for(server.resp_port)
    assert check(r, "hourly", "shared-key", "COST", 0)[:3] == [1, 1000, 0]
