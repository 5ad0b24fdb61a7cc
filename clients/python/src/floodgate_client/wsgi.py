"""WSGI middleware: every request is checked with floodgate before the
application sees it (Flask, Django, Pyramid, any WSGI app)."""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Optional, Union

from ._client import Client, default_client
from ._common import (Middleware, UnavailableError, add_missing, admitted_fields, denial,
                      unavailable)

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
                 wait_ms: Optional[int] = None):
        super().__init__(app, rule, key, cost, tier, client, on_error, wait_ms)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        key = self.key(environ)
        if key is None:
            return self.app(environ, start_response)
        cost = self.cost(environ) if callable(self.cost) else self.cost
        tier = self.tier(environ) if callable(self.tier) else self.tier
        client = self.client or default_client()
        try:
            d = client.check(self.rule, key, cost=cost, tier=tier, wait_ms=self.wait_ms)
        except UnavailableError as e:
            log.warning("floodgate check failed (on_error=%s): %s", self.on_error, e)
            if self.on_error == "allow":
                return self.app(environ, start_response)
            return _answer(start_response, *unavailable())
        if not d.allowed:
            return _answer(start_response, *denial(d))
        fields = admitted_fields(d)

        def start_with_fields(status: str, headers: list, exc_info: Any = None):
            headers = add_missing(headers, fields)
            if exc_info is None:
                return start_response(status, headers)
            return start_response(status, headers, exc_info)

        return self.app(environ, start_with_fields)


def _answer(start_response: Callable, status: int, headers: list, body: bytes) -> Iterable[bytes]:
    start_response(f"{status} {_REASONS[status]}", headers)
    return [body]
