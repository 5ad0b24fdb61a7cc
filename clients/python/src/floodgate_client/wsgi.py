"""WSGI middleware: every request is checked with floodgate before the
application sees it (Flask, Django, Pyramid, any WSGI app), or, with
`reserve=`, an estimate is reserved before and settled from the response
after."""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from ._client import Client, default_client
from ._common import (BodyTap, Middleware, Reserve, SettleOutcome, UnavailableError, add_missing,
                      admitted_fields, denial, reservation_denial, settle_amount, unavailable)

log = logging.getLogger("floodgate_client")

_REASONS = {429: "Too Many Requests", 503: "Service Unavailable"}


def remote_addr(environ: dict) -> Optional[str]:
    """The default key: the client's address as the WSGI server saw it."""
    return environ.get("REMOTE_ADDR") or None


class FloodgateWSGI(Middleware):
    """Wraps a WSGI application.

    rule:     the floodgate rule to check.
    key:      environ -> the subject (a str); None lets the request through
              unchecked. Default: REMOTE_ADDR.
    cost:     an int, or environ -> int. Default 1.
    tier:     a str, or environ -> str or None. Default none.
    client:   a Client; default: floodgate_client.default_client().
    on_error: what to do when floodgate cannot be asked (unreachable, timed
              out, a server error): "allow" (default) calls the application,
              "deny" answers 503. A check floodgate refuses (an unknown rule,
              a bad key) raises RequestError: that is a bug to see, not an
              outage to ride out.
    wait_ms:  hold a request floodgate would deny for at most this long, if
              it could be admitted by then.
    priority: the rule's priority class of the request ("critical",
              "default", "batch", ...): a str, or environ -> str or None.
    reserve:  a Reserve: reserve its estimate before the application runs
              in place of the check (not with cost or wait_ms), and settle
              what the request cost once the response is complete (the
              body's iterable closed): the settle callback's figure, or the
              estimate when it gives None, raises, or the response failed.
              A settle that fails is logged (a warning), never raised. The
              application finds the Reservation in
              environ["floodgate.reservation"].
    on_settle: with reserve, called with a SettleOutcome after each settle.

    Denied: 429 with floodgate's Retry-After, RateLimit-Policy and RateLimit
    fields and an application/problem+json body; the application is not
    called. Admitted: the application's response gains RateLimit-Policy and
    RateLimit (unless it set them itself).
    """

    def __init__(self, app: Callable, rule: str,
                 key: Callable[[dict], Optional[str]] = remote_addr,
                 cost: Union[int, Callable[[dict], int]] = 1,
                 tier: Union[None, str, Callable[[dict], Optional[str]]] = None,
                 client: Optional[Client] = None, on_error: str = "allow",
                 wait_ms: Optional[int] = None,
                 priority: Union[None, str, Callable[[dict], Optional[str]]] = None,
                 reserve: Optional[Reserve] = None,
                 on_settle: Optional[Callable[[SettleOutcome], None]] = None):
        super().__init__(app, rule, key, cost, tier, client, on_error, wait_ms, priority,
                         reserve, on_settle)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        key = self.key(environ)
        if key is None:
            return self.app(environ, start_response)
        tier = self.tier(environ) if callable(self.tier) else self.tier
        priority = self.priority(environ) if callable(self.priority) else self.priority
        client = self.client or default_client()
        if self.reserve is not None:
            return self._reserved(environ, start_response, client, key, tier, priority)
        cost = self.cost(environ) if callable(self.cost) else self.cost
        try:
            d = client.check(self.rule, key, cost=cost, tier=tier, wait_ms=self.wait_ms,
                             priority=priority)
        except UnavailableError as e:
            log.warning("floodgate check failed (on_error=%s): %s", self.on_error, e)
            if self.on_error == "allow":
                return self.app(environ, start_response)
            return _answer(start_response, *unavailable())
        if not d.allowed:
            return _answer(start_response, *denial(d))
        return self.app(environ, _with_fields(start_response, admitted_fields(d)))

    def _reserved(self, environ: dict, start_response: Callable, client: Client, key: str,
                  tier: Optional[str], priority: Optional[str]) -> Iterable[bytes]:
        reserve = self.reserve
        assert reserve is not None
        estimate = reserve.estimate(environ) if callable(reserve.estimate) else reserve.estimate
        try:
            r = client.reserve(self.rule, key, estimate, ttl_ms=reserve.ttl_ms, tier=tier,
                               priority=priority)
        except UnavailableError as e:
            log.warning("floodgate reserve failed (on_error=%s): %s", self.on_error, e)
            if self.on_error == "allow":
                return self.app(environ, start_response)
            return _answer(start_response, *unavailable())
        if not r.admitted:
            return _answer(start_response, *reservation_denial(r, estimate))
        environ["floodgate.reservation"] = r
        fields = admitted_fields(r)
        if r.reservation is None:  # admitted by a fallback decision: nothing to settle
            return self.app(environ, _with_fields(start_response, fields))
        settler = _Settler(self, client, environ, key, r.reservation, estimate)

        def start_with_fields(status: str, headers: list, exc_info: Any = None):
            settler.tap.status = int(status.split(" ", 1)[0])
            settler.tap.headers = list(headers)
            headers = add_missing(headers, fields)
            write = (start_response(status, headers) if exc_info is None
                     else start_response(status, headers, exc_info))

            def write_kept(data: bytes) -> None:
                settler.tap.keep(data)
                write(data)

            return write_kept

        try:
            body = self.app(environ, start_with_fields)
        except BaseException:
            settler.settle(complete=False)
            raise
        return _Settling(body, settler)


class _Settler:
    """Settles one reservation, once: from the response when it was
    complete, else at the estimate."""

    def __init__(self, mw: FloodgateWSGI, client: Client, environ: dict, key: str,
                 reservation: str, estimate: int):
        assert mw.reserve is not None
        self.mw = mw
        self.client = client
        self.environ = environ
        self.key = key
        self.reservation = reservation
        self.estimate = estimate
        self.tap = BodyTap(mw.reserve.max_body)
        self.done = False

    def settle(self, complete: bool) -> None:
        if self.done:
            return
        self.done = True
        mw, callback = self.mw, self.mw.reserve.settle  # type: ignore[union-attr]
        actual = None
        if complete and callback is not None:
            try:
                actual = callback(self.environ, self.tap.status, self.tap.headers,
                                  self.tap.body())
            except Exception:
                log.warning("floodgate settle callback raised; settling reservation at its "
                            "estimate", exc_info=True)
        amount, from_response = settle_amount(actual, self.estimate)
        settlement, error = None, None
        try:
            settlement = self.client.settle(mw.rule, self.key, self.reservation, amount)
        except Exception as e:
            error = e
            log.warning("floodgate settle failed: %s", e)
        if mw.on_settle is not None:
            try:
                mw.on_settle(SettleOutcome(mw.rule, self.key, self.reservation, self.estimate,
                                           amount, from_response, settlement, error))
            except Exception:
                log.warning("floodgate on_settle raised", exc_info=True)


class _Settling:
    """The application's body, passed on chunk by chunk and kept (up to
    max_body) for the settle callback; close() settles, after the server
    has sent the whole response (complete only when the body was read to
    its end)."""

    def __init__(self, body: Iterable[bytes], settler: _Settler):
        self.body = body
        self.settler = settler
        self.complete = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.body:
                self.settler.tap.keep(chunk)
                yield chunk
        except BaseException:
            self.settler.settle(complete=False)
            raise
        self.complete = True

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.settler.settle(self.complete)


def _with_fields(start_response: Callable, fields: list) -> Callable:
    """start_response adding `fields` to those the application sets."""

    def start_with_fields(status: str, headers: list, exc_info: Any = None):
        headers = add_missing(headers, fields)
        if exc_info is None:
            return start_response(status, headers)
        return start_response(status, headers, exc_info)

    return start_with_fields


def _answer(start_response: Callable, status: int, headers: list, body: bytes) -> Iterable[bytes]:
    start_response(f"{status} {_REASONS[status]}", headers)
    return [body]
