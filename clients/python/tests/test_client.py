"""Client and AsyncClient against a live floodgate; those taking `transport`
run in clear and over TLS (test_tls.py has what only TLS has)."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest

import floodgate_client
from floodgate_client import AsyncClient, Client, RequestError, UnavailableError
from floodgate_client import _client as client_module

from conftest import CONFIG, Floodgate, dead_url, elapsed


def test_five_per_minute_admits_exactly_five(proxy, key):
    with Client(proxy.url) as c:
        for i in range(5):
            d = c.check("five", key)
            assert (d.allowed, d.status, d.limit, d.remaining) == (True, 200, 5, 4 - i)
            assert (d.retry_after_ms, d.reset_after_ms) == (0, 60000)
            assert d.rate_limit_policy == '"five";q=5;w=60'
            assert d.rate_limit == f'"five";r={4 - i};t=60'
            assert d.retry_after is None
            assert (d.rule, d.key, d.fallback) == ("five", key, None)
        d = c.check("five", key)
        assert (d.allowed, d.status, d.limit, d.remaining) == (False, 429, 5, 0)
        assert 55000 < d.retry_after_ms <= 60000
        assert d.retry_after == str(math.ceil(d.retry_after_ms / 1000))
        assert d.binding == "5/minute"
        # Exactly the fields floodgate sent, in the order it sent them.
        status, fields = proxy.last()
        assert status == 429
        assert d.headers == [("RateLimit-Policy", fields["ratelimit-policy"]),
                             ("RateLimit", fields["ratelimit"]),
                             ("Retry-After", fields["retry-after"])]
        # Kept alive: six checks, one connection.
        assert proxy.connections == 1


def test_cost_and_tier_are_passed(transport, key):
    with Client(transport.url, **transport.tls) as c:
        d = c.check("five", key, cost=3)
        assert (d.allowed, d.remaining) == (True, 2)
        d = c.check("five", key, cost=3)
        assert (d.allowed, d.remaining) == (False, 2)  # denied requests consume nothing
        assert c.check("five", key, cost=0).remaining == 2  # cost 0 peeks
        d = c.check("tiered", key, tier="pro", cost=7)
        assert (d.allowed, d.limit, d.remaining) == (True, 50, 43)
        assert d.rate_limit_policy == '"tiered";q=50;w=60'
        d = c.check("tiered", key)
        assert (d.limit, d.remaining) == (5, 4)  # the default tier is another subject


def test_keys_are_independent(transport, key):
    with Client(transport.url, **transport.tls) as c:
        assert [c.check("five", key + "a").allowed for _ in range(6)] == [True] * 5 + [False]
        assert [c.check("five", key + "b").allowed for _ in range(6)] == [True] * 5 + [False]


def test_unknown_rule_and_bad_arguments_are_request_errors(transport, key):
    with Client(transport.url, **transport.tls) as c:
        with pytest.raises(RequestError) as e:
            c.check("no_such_rule", key)
        assert (e.value.status, e.value.detail) == (404, "unknown rule 'no_such_rule'")
        assert "unknown rule 'no_such_rule'" in str(e.value)
        with pytest.raises(RequestError) as e:
            c.check("five", key, cost=-1)
        assert e.value.status == 400 and "cost" in e.value.detail
        with pytest.raises(RequestError) as e:
            c.check("five", "")
        assert (e.value.status, e.value.detail) == (400, '"key" must not be empty')
        with pytest.raises(TypeError):
            c.check("five", 42)
        # The connection is still good after the errors.
        assert c.check("five", key).remaining == 4


def test_unreachable_is_unavailable_error():
    url = dead_url()
    with Client(url, timeout=1) as c:
        with pytest.raises(UnavailableError) as e:
            c.check("five", "k")
    assert url in str(e.value) and "unreachable" in str(e.value)


def test_silent_server_times_out(silent_server):
    start = time.monotonic()
    with Client(silent_server, timeout=0.3) as c:
        with pytest.raises(UnavailableError) as e:
            c.check("five", "k")
    assert "did not answer within 0.3 s" in str(e.value)
    assert 0.3 <= time.monotonic() - start < 2.0


def test_threads_share_one_client_exactly(transport, transport_proxy, key):
    proxy = transport_proxy
    c = Client(proxy.url, **transport.tls)
    results: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait()
        mine = [c.check("hundred", key).allowed for _ in range(20)]
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    c.close()
    assert len(results) == 320
    assert results.count(True) == 100
    # Connections are reused: at most one per thread, not one per check.
    assert 1 <= proxy.connections <= 16


def test_wait_ms_holds_until_admitted(floodgate, key):
    with Client(floodgate.url, timeout=0.3) as c:
        assert c.check("paced", key).allowed
        denied = c.check("paced", key)
        assert not denied.allowed and 1000 < denied.retry_after_ms <= 2000
        d, took = elapsed(lambda: c.check("paced", key, wait_ms=5000))
        assert d.allowed
        # Held by floodgate until admitted, well past the client's 0.3 s.
        assert 0.5 < took < 2.5


def test_module_level_check_uses_floodgate_url(floodgate, key, monkeypatch):
    monkeypatch.setenv("FLOODGATE_URL", floodgate.url)
    monkeypatch.setattr(client_module, "_default", None)
    d = floodgate_client.check("five", key, cost=2)
    assert (d.allowed, d.remaining) == (True, 3)
    assert floodgate_client.default_client().url == floodgate.url
    floodgate_client.default_client().close()


def test_async_client_concurrent_tasks_exactly(transport, transport_proxy, key):
    proxy = transport_proxy

    async def main() -> list[bool]:
        async with AsyncClient(proxy.url, max_connections=8, **transport.tls) as c:
            return await asyncio.gather(*(c.check("hundred", key) for _ in range(300)))

    decisions = asyncio.run(main())
    assert len(decisions) == 300
    assert sum(d.allowed for d in decisions) == 100
    assert sorted(d.remaining for d in decisions if d.allowed) == list(range(100))
    assert all(d.status == 429 and d.retry_after is not None for d in decisions if not d.allowed)
    assert 1 <= proxy.connections <= 8


def test_async_client_errors(floodgate, key, silent_server):
    async def main() -> None:
        async with AsyncClient(floodgate.url) as c:
            with pytest.raises(RequestError) as e:
                await c.check("no_such_rule", key)
            assert (e.value.status, e.value.detail) == (404, "unknown rule 'no_such_rule'")
            d = await c.check("tiered", key, cost=2, tier="pro")
            assert (d.limit, d.remaining) == (50, 48)
        async with AsyncClient(dead_url()) as c:
            with pytest.raises(UnavailableError, match="unreachable"):
                await c.check("five", key)
        async with AsyncClient(silent_server, timeout=0.3) as c:
            with pytest.raises(UnavailableError, match="did not answer within 0.3 s"):
                await c.check("five", key)

    asyncio.run(main())


@pytest.fixture(scope="module")
def short_idle():
    """A floodgate that closes keep-alive connections idle for 0.5 s."""
    server = Floodgate("server: { http_idle_timeout: 500ms }\n" + CONFIG)
    yield server
    server.stop()


def test_client_reconnects_after_floodgate_closes_idle(short_idle, key):
    # The kept-alive connection floodgate closed is replaced, and the check
    # is counted once.
    with Client(short_idle.url) as c:
        assert c.check("five", key).remaining == 4
        time.sleep(1.0)
        assert c.check("five", key).remaining == 3
        assert c.check("five", key).remaining == 2
    assert any("reason=idle_timeout" in line for line in short_idle.lines)


def test_async_client_reconnects_after_floodgate_closes_idle(short_idle, key):
    async def main() -> list:
        async with AsyncClient(short_idle.url) as c:
            out = [(await c.check("five", key)).remaining]
            await asyncio.sleep(1.0)
            out.append((await c.check("five", key)).remaining)
            out.append((await c.check("five", key)).remaining)
            return out

    assert asyncio.run(main()) == [4, 3, 2]
