"""ASGI 3 middleware: every HTTP request is checked with floodgate before
the application sees it (Starlette, FastAPI, Django's ASGI handler, ...),
or, with `reserve=`, an estimate is reserved before and settled from the
response after. Lifespan and websocket scopes pass through untouched."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Awaitable, Callable, Optional, Set, Union

from ._async import AsyncClient
from ._common import (BodyTap, Middleware, Reserve, SettleOutcome, UnavailableError, add_missing,
                      admitted_fields, denial, reservation_denial, settle_amount, unavailable)

log = logging.getLogger("floodgate_client")


def client_host(scope: dict) -> Optional[str]:
    """The default key: the client's address as the ASGI server saw it."""
    client = scope.get("client")
    return client[0] if client else None


async def _value(f: Any, scope: dict) -> Any:
    """f(scope) when f is callable (awaited if it returns an awaitable), else f."""
    if not callable(f):
        return f
    v = f(scope)
    return await v if inspect.isawaitable(v) else v


class FloodgateASGI(Middleware):
    """Wraps an ASGI 3 application; the arguments are FloodgateWSGI's, with
    the ASGI scope where it has the WSGI environ (callables may be async,
    Reserve's estimate and settle too), and an AsyncClient (default: one
    made from $FLOODGATE_URL at the first request).

    With `reserve`, the application finds the Reservation in
    scope["floodgate.reservation"]; the response is complete when it has
    sent its last body message (more_body false); the settle then runs in a
    task of its own, so the application's call returns without waiting.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], rule: str,
                 key: Callable[[dict], Any] = client_host,
                 cost: Union[int, Callable[[dict], Any]] = 1,
                 tier: Union[None, str, Callable[[dict], Any]] = None,
                 client: Optional[AsyncClient] = None, on_error: str = "allow",
                 wait_ms: Optional[int] = None,
                 priority: Union[None, str, Callable[[dict], Any]] = None,
                 reserve: Optional[Reserve] = None,
                 on_settle: Optional[Callable[[SettleOutcome], Any]] = None):
        super().__init__(app, rule, key, cost, tier, client, on_error, wait_ms, priority,
                         reserve, on_settle)
        # The settles in flight: a task nothing refers to may be collected.
        self._settles: Set[asyncio.Task] = set()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = await _value(self.key, scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        tier = await _value(self.tier, scope)
        priority = await _value(self.priority, scope)
        if self.client is None:
            self.client = AsyncClient()
        if self.reserve is not None:
            await self._reserved(scope, receive, send, key, tier, priority)
            return
        cost = await _value(self.cost, scope)
        try:
            d = await self.client.check(self.rule, key, cost=cost, tier=tier,
                                        wait_ms=self.wait_ms, priority=priority)
        except UnavailableError as e:
            log.warning("floodgate check failed (on_error=%s): %s", self.on_error, e)
            if self.on_error == "allow":
                await self.app(scope, receive, send)
            else:
                await _answer(send, *unavailable())
            return
        if not d.allowed:
            await _answer(send, *denial(d))
            return
        await self.app(scope, receive, _with_fields(send, admitted_fields(d)))

    async def _reserved(self, scope: dict, receive: Callable, send: Callable, key: str,
                        tier: Optional[str], priority: Optional[str]) -> None:
        reserve, client = self.reserve, self.client
        assert reserve is not None and client is not None
        estimate = await _value(reserve.estimate, scope)
        try:
            r = await client.reserve(self.rule, key, estimate, ttl_ms=reserve.ttl_ms, tier=tier,
                                     priority=priority)
        except UnavailableError as e:
            log.warning("floodgate reserve failed (on_error=%s): %s", self.on_error, e)
            if self.on_error == "allow":
                await self.app(scope, receive, send)
            else:
                await _answer(send, *unavailable())
            return
        if not r.admitted:
            await _answer(send, *reservation_denial(r, estimate))
            return
        scope = dict(scope)
        scope["floodgate.reservation"] = r
        fields = admitted_fields(r)
        if r.reservation is None:  # admitted by a fallback decision: nothing to settle
            await self.app(scope, receive, _with_fields(send, fields))
            return
        tap = BodyTap(reserve.max_body)
        complete = False

        async def send_kept(message: dict) -> None:
            nonlocal complete
            if message["type"] == "http.response.start":
                tap.status = int(message["status"])
                message, tap.headers = _started(message, fields)
            elif message["type"] == "http.response.body":
                if reserve.settle is not None:
                    tap.keep(message.get("body", b""))
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True

        try:
            await self.app(scope, receive, send_kept)
        finally:
            task = asyncio.ensure_future(
                self._settle(client, scope, key, r.reservation, estimate, tap, complete))
            self._settles.add(task)
            task.add_done_callback(self._settles.discard)

    async def _settle(self, client: AsyncClient, scope: dict, key: str, reservation: str,
                      estimate: int, tap: BodyTap, complete: bool) -> None:
        """Settles from the response when it was complete (the settle
        callback's figure), else at the estimate. Raises nothing."""
        reserve = self.reserve
        assert reserve is not None
        actual = None
        if complete and reserve.settle is not None:
            try:
                actual = reserve.settle(scope, tap.status, tap.headers, tap.body())
                if inspect.isawaitable(actual):
                    actual = await actual
            except Exception:
                log.warning("floodgate settle callback raised; settling reservation at its "
                            "estimate", exc_info=True)
        amount, from_response = settle_amount(actual, estimate)
        settlement, error = None, None
        try:
            settlement = await client.settle(self.rule, key, reservation, amount)
        except Exception as e:
            error = e
            log.warning("floodgate settle failed: %s", e)
        if self.on_settle is not None:
            try:
                done = self.on_settle(SettleOutcome(self.rule, key, reservation, estimate, amount,
                                                    from_response, settlement, error))
                if inspect.isawaitable(done):
                    await done
            except Exception:
                log.warning("floodgate on_settle raised", exc_info=True)


def _with_fields(send: Callable, fields: list) -> Callable:
    """send adding `fields` to those the application's response start sets."""

    async def send_with_fields(message: dict) -> None:
        if message["type"] == "http.response.start":
            message = _started(message, fields)[0]
        await send(message)

    return send_with_fields


def _started(message: dict, fields: list) -> tuple:
    """An http.response.start message with `fields` added (those the
    application did not set), and the application's own fields as str."""
    headers = [(bytes(n).decode("latin-1"), bytes(v).decode("latin-1"))
               for n, v in message.get("headers", [])]
    message = dict(message)
    message["headers"] = [(n.encode("latin-1"), v.encode("latin-1"))
                          for n, v in add_missing(headers, fields)]
    return message, headers


async def _answer(send: Callable, status: int, headers: list, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]})
    await send({"type": "http.response.body", "body": body})
