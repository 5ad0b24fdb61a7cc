"""reserve() and settle() of Client and AsyncClient (POST /v1/reservations
and .../settle) and check()'s priority, against a live floodgate; those
taking `transport` run in clear and over TLS."""

from __future__ import annotations

import asyncio
import time

import pytest

from floodgate_client import (AsyncClient, Client, RequestError, Reservation, Settlement,
                              UnavailableError)

from conftest import dead_url, used


def test_reserve_takes_the_estimate_and_settle_charges_the_actual(transport, key):
    with Client(transport.url, **transport.tls) as c:
        r = c.reserve("tokens", key, 300)
        assert isinstance(r, Reservation)
        assert (r.admitted, r.status, r.remaining) == (True, 200, 700)
        assert isinstance(r.reservation, str) and r.reservation
        assert r.reset_after_ms is not None and r.reset_after_ms > 0
        assert c.check("tokens", key, cost=0).remaining == 700
        # Less than the estimate: the difference is given back.
        s = c.settle("tokens", key, r.reservation, 120)
        assert isinstance(s, Settlement)
        assert (s.charged, s.remaining) == (120, 880)
        assert c.check("tokens", key, cost=0).remaining == 880
        # More: the difference is charged.
        r = c.reserve("tokens", key, 100, ttl_ms=60000)
        assert (r.admitted, r.remaining) == (True, 780)
        assert c.settle("tokens", key, r.reservation, 250) == Settlement(250, 630)
        assert c.check("tokens", key, cost=0).remaining == 630


def test_an_actual_past_the_limit_leaves_the_subject_in_debt(floodgate, key):
    with Client(floodgate.url) as c:
        r = c.reserve("small", key, 50)
        s = c.settle("small", key, r.reservation, 130)
        assert (s.charged, s.remaining) == (130, -30)
        assert c.check("small", key).allowed is False
        again = c.reserve("small", key, 1)
        assert (again.admitted, again.reservation, again.status) == (False, None, 429)


def test_an_estimate_that_does_not_fit_is_denied(floodgate, key):
    with Client(floodgate.url) as c:
        assert c.reserve("small", key, 80).admitted
        r = c.reserve("small", key, 30)
        assert (r.admitted, r.reservation, r.status, r.remaining) == (False, None, 429, 20)
        assert r.reset_after_ms is not None and r.reset_after_ms > 0
        # Retry-After: floodgate's, or made from reset_after_ms.
        fields = dict(r.headers)
        assert 1 <= int(fields["Retry-After"]) <= 86400
        assert used(floodgate.url, "small", key, 100) == 80
        assert c.reserve("small", key, 20).admitted  # what fits still does


def test_settle_errors_are_request_errors_with_floodgates_message(transport, key):
    with Client(transport.url, **transport.tls) as c:
        r = c.reserve("tokens", key, 10)
        with pytest.raises(RequestError, match="no reservation"):
            c.settle("tokens", key, "no-such-reservation", 5)
        with pytest.raises(RequestError, match="no reservation"):
            c.settle("tokens", key + "-other", r.reservation, 5)
        with pytest.raises(RequestError, match='"actual" must be an integer') as e:
            c.settle("tokens", key, r.reservation, -1)
        assert e.value.status == 400
        with pytest.raises(TypeError):
            c.settle("tokens", key, r.reservation, "many")
        assert c.settle("tokens", key, r.reservation, 5) == Settlement(5, 995)
        with pytest.raises(RequestError, match="settled already"):
            c.settle("tokens", key, r.reservation, 5)
        with pytest.raises(RequestError, match='"estimate" must be an integer') as e:
            c.reserve("tokens", key, 0)
        assert e.value.status == 400
        assert c.check("tokens", key, cost=0).remaining == 995


def test_unsettled_reservation_settles_at_its_estimate_after_its_ttl(floodgate, key):
    with Client(floodgate.url) as c:
        r = c.reserve("tokens", key, 40, ttl_ms=200)
        assert r.admitted
        time.sleep(0.6)
        with pytest.raises(RequestError, match="no reservation"):
            c.settle("tokens", key, r.reservation, 1)
        assert used(floodgate.url, "tokens", key, 1000) == 40


def test_check_priority(floodgate, key):
    with Client(floodgate.url) as c:
        assert [c.check("shed", key, priority="batch").allowed for _ in range(7)] == \
            [True] * 6 + [False]
        assert [c.check("shed", key, priority="default").allowed for _ in range(3)] == \
            [True, True, False]
        assert [c.check("shed", key, priority="critical").allowed for _ in range(3)] == \
            [True, True, False]
        with pytest.raises(RequestError):
            c.check("shed", key, priority="no_such_class")


def test_async_client_reserves_and_settles(transport, key):
    async def go():
        async with AsyncClient(transport.url, **transport.tls) as c:
            r = await c.reserve("tokens", key, 200, ttl_ms=60000, priority="default")
            assert (r.admitted, r.remaining) == (True, 800)
            assert await c.settle("tokens", key, r.reservation, 50) == Settlement(50, 950)
            with pytest.raises(RequestError, match="settled already"):
                await c.settle("tokens", key, r.reservation, 50)
            d = await c.check("shed", key, priority="critical")
            assert d.allowed
            denied = await c.reserve("small", key, 101)
            assert (denied.admitted, denied.reservation) == (False, None)

    asyncio.run(go())


def test_unreachable_floodgate_is_unavailable(key):
    with Client(dead_url(), timeout=1) as c:
        with pytest.raises(UnavailableError):
            c.reserve("tokens", key, 1)
        with pytest.raises(UnavailableError):
            c.settle("tokens", key, "r", 1)
