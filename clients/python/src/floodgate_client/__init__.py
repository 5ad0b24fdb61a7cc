"""floodgate_client: ask floodgate whether a request may go ahead.

    import floodgate_client
    d = floodgate_client.check("api", "user:42")
    if not d.allowed:
        ...  # 429, retry after d.retry_after seconds

Client (threads) and AsyncClient (asyncio) speak to floodgate's HTTP front
(POST /v1/check, and reserve / settle: POST /v1/reservations ...);
FloodgateWSGI and FloodgateASGI check every request of a web application,
or reserve an estimate for it and settle what it cost from its response
(Reserve, openai_usage). Standard library only.
"""

from ._async import AsyncClient
from ._client import Client, check, default_client
from ._common import (Decision, FloodgateError, RequestError, Reservation, Reserve,
                      SettleOutcome, Settlement, UnavailableError, openai_usage)
from .asgi import FloodgateASGI
from .wsgi import FloodgateWSGI

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "Decision",
    "FloodgateASGI",
    "FloodgateError",
    "FloodgateWSGI",
    "RequestError",
    "Reservation",
    "Reserve",
    "SettleOutcome",
    "Settlement",
    "UnavailableError",
    "check",
    "default_client",
    "openai_usage",
]
