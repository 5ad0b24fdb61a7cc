"""ASGI 3 middleware: every HTTP request is checked with floodgate before
the application sees it (Starlette, FastAPI, Django's ASGI handler, ...).
Lifespan and websocket scopes pass through untouched."""

from __future__ import annotations

import inspect
import logging
from typing import Any, Awaitable, Callable, Optional, Union

from ._async import AsyncClient
from ._common import (Middleware, UnavailableError, add_missing, admitted_fields, denial,
                      unavailable)

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
    the ASGI scope where it has the WSGI environ (callables may be async),
    and an AsyncClient (default: one made from $FLOODGATE_URL at the first
    request)."""

    def __init__(self, app: Callable[..., Awaitable[None]], rule: str,
                 key: Callable[[dict], Any] = client_host,
                 cost: Union[int, Callable[[dict], Any]] = 1,
                 tier: Union[None, str, Callable[[dict], Any]] = None,
                 client: Optional[AsyncClient] = None, on_error: str = "allow",
                 wait_ms: Optional[int] = None):
        super().__init__(app, rule, key, cost, tier, client, on_error, wait_ms)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = await _value(self.key, scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        cost = await _value(self.cost, scope)
        tier = await _value(self.tier, scope)
        if self.client is None:
            self.client = AsyncClient()
        try:
            d = await self.client.check(self.rule, key, cost=cost, tier=tier,
                                        wait_ms=self.wait_ms)
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
        fields = admitted_fields(d)

        async def send_with_fields(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [(bytes(n).decode("latin-1"), bytes(v).decode("latin-1"))
                           for n, v in message.get("headers", [])]
                message = dict(message)
                message["headers"] = [(n.encode("latin-1"), v.encode("latin-1"))
                                      for n, v in add_missing(headers, fields)]
            await send(message)

        await self.app(scope, receive, send_with_fields)


async def _answer(send: Callable, status: int, headers: list, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]})
    await send({"type": "http.response.body", "body": body})
