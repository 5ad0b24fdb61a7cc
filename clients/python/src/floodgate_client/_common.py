"""What the synchronous and the asyncio clients share: the decision, the
errors, the request's encoding and the answer's decoding."""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 2.0

# The response fields a decision carries and that middleware passes on.
POLICY_FIELD = "RateLimit-Policy"
STATE_FIELD = "RateLimit"
RETRY_FIELD = "Retry-After"


class FloodgateError(Exception):
    """Base class of every error this package raises."""


class RequestError(FloodgateError):
    """floodgate refused the check itself (an unknown rule, a bad key or
    cost, a missing token): a 4xx answer. `detail` is floodgate's own
    message from its application/problem+json body."""

    def __init__(self, status: int, title: str, detail: str):
        self.status = status
        self.title = title
        self.detail = detail
        super().__init__(f"floodgate refused the check ({status} {title}): {detail}")


class UnavailableError(FloodgateError):
    """floodgate could not be asked: it is unreachable, did not answer in
    time, closed the connection, or answered with a server error. This is
    what middleware's `on_error` decides about."""

    def __init__(self, message: str, status: Optional[int] = None):
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class Decision:
    """floodgate's answer to one check: the figures of the JSON body and the
    rate limit fields of the HTTP response, as floodgate sent them."""

    allowed: bool
    limit: int
    remaining: Optional[int]  # None for a fallback decision: the usage is unknown
    retry_after_ms: int  # 0 when admitted; -1: never (the cost exceeds the limit)
    reset_after_ms: Optional[int]  # None for a fallback decision
    rule: str
    key: str
    status: int  # 200 admitted, 429 denied
    rate_limit_policy: Optional[str] = None  # the RateLimit-Policy field
    rate_limit: Optional[str] = None  # the RateLimit field (absent for a fallback)
    retry_after: Optional[str] = None  # the Retry-After field (seconds), when denied
    fallback: Optional[str] = None  # "backend_error" or "store_full"; None for a real decision
    binding: Optional[str] = None  # the limit that denied it, as the rule writes it ("5/minute")
    shadow_denied: bool = False
    limits: Tuple[Mapping[str, Any], ...] = ()
    body: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def headers(self) -> List[Tuple[str, str]]:
        """RateLimit-Policy, RateLimit and Retry-After as floodgate sent
        them (only those it sent), for a response of your own."""
        out = []
        for name, value in ((POLICY_FIELD, self.rate_limit_policy), (STATE_FIELD, self.rate_limit),
                            (RETRY_FIELD, self.retry_after)):
            if value is not None:
                out.append((name, value))
        return out


class Endpoint:
    """Where floodgate's HTTP front is: scheme, host, port and the check's path."""

    def __init__(self, url: Optional[str]):
        self.url = url or os.environ.get("FLOODGATE_URL") or DEFAULT_URL
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"floodgate URL must be http://host[:port] or https://host[:port], "
                             f"not {self.url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.path = parts.path.rstrip("/") + "/v1/check"
        default_port = 443 if self.https else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_field = host if self.port == default_port else f"{host}:{self.port}"


def token_or_env(token: Optional[str]) -> Optional[str]:
    return token if token is not None else (os.environ.get("FLOODGATE_TOKEN") or None)


def encode_check(rule: str, key: str, cost: int, tier: Optional[str],
                 wait_ms: Optional[int]) -> bytes:
    if not isinstance(rule, str) or not isinstance(key, str):
        raise TypeError("rule and key must be strings")
    if isinstance(cost, bool) or not isinstance(cost, int):
        raise TypeError("cost must be an int")
    body: Dict[str, Any] = {"rule": rule, "key": key, "cost": cost}
    if tier is not None:
        body["tier"] = tier
    if wait_ms is not None:
        if isinstance(wait_ms, bool) or not isinstance(wait_ms, int):
            raise TypeError("wait_ms must be an int")
        body["wait_ms"] = wait_ms
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def read_timeout(timeout: float, wait_ms: Optional[int]) -> float:
    """A held check (wait_ms) is answered by its deadline: wait that long more."""
    return timeout + (wait_ms or 0) / 1000.0


def decode_check(url: str, status: int, headers: Mapping[str, str], body: bytes) -> Decision:
    """The decision in a response to POST /v1/check, or the error it says.
    `headers` is looked up with lower-case names."""
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict) and "allowed" in doc and status in (200, 403, 429):
        try:
            return Decision(
                allowed=bool(doc["allowed"]),
                limit=int(doc["limit"]),
                remaining=doc.get("remaining"),
                retry_after_ms=int(doc["retry_after_ms"]),
                reset_after_ms=doc.get("reset_after_ms"),
                rule=str(doc.get("rule", "")),
                key=str(doc.get("key", "")),
                status=status,
                rate_limit_policy=headers.get("ratelimit-policy"),
                rate_limit=headers.get("ratelimit"),
                retry_after=headers.get("retry-after"),
                fallback=doc.get("fallback"),
                binding=doc.get("binding"),
                shadow_denied=bool(doc.get("shadow_denied", False)),
                limits=tuple(doc.get("limits", ())),
                body=doc,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise UnavailableError(f"floodgate at {url} sent a decision without {e}", status)
    if 400 <= status < 500 and isinstance(doc, dict):
        raise RequestError(status, str(doc.get("title", "")), str(doc.get("detail", "")))
    detail = doc.get("detail", "") if isinstance(doc, dict) else ""
    if status >= 500:
        raise UnavailableError(f"floodgate at {url} answered {status}"
                               + (f": {detail}" if detail else ""), status)
    raise UnavailableError(f"floodgate at {url} answered {status} without a decision; "
                           f"is it floodgate's HTTP front?", status)


# --------------------------------------------------------------------------
# What both middlewares answer themselves.

ON_ERROR = ("allow", "deny")


class Middleware:
    """What the WSGI and ASGI middleware are both given: the app they wrap,
    the rule, how a request makes its key, cost and tier, the client, what
    to do when floodgate is unreachable, and how long a check may wait."""

    def __init__(self, app, rule, key, cost, tier, client, on_error, wait_ms):
        self.app = app
        self.rule = rule
        self.key = key
        self.cost = cost
        self.tier = tier
        self.client = client
        self.on_error = check_on_error(on_error)
        self.wait_ms = wait_ms


def check_on_error(on_error: str) -> str:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'allow' or 'deny', not {on_error!r}")
    return on_error


def problem(status: int, title: str, detail: str) -> bytes:
    return json.dumps({"type": "about:blank", "title": title, "status": status,
                       "detail": detail}, separators=(",", ":")).encode("utf-8")


def denial(d: Decision) -> Tuple[int, List[Tuple[str, str]], bytes]:
    """429 Too Many Requests with floodgate's fields and a problem body."""
    if d.retry_after is not None:
        detail = f"Too many requests; retry after {d.retry_after} s."
    else:
        detail = "Too many requests."
    body = problem(429, "Too Many Requests", detail)
    headers = [("Content-Type", "application/problem+json"),
               ("Content-Length", str(len(body)))] + d.headers
    return 429, headers, body


def unavailable() -> Tuple[int, List[Tuple[str, str]], bytes]:
    """503 for on_error="deny" when floodgate could not be asked."""
    body = problem(503, "Service Unavailable", "The rate limiter is unavailable; try again later.")
    return 503, [("Content-Type", "application/problem+json"),
                 ("Content-Length", str(len(body)))], body


def admitted_fields(d: Decision) -> List[Tuple[str, str]]:
    """What an admitted response gains: RateLimit-Policy and RateLimit."""
    return [(n, v) for n, v in d.headers if n != RETRY_FIELD]


def add_missing(headers: List[Tuple[str, str]],
                extra: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """`headers` plus those of `extra` whose name the app did not set."""
    present = {name.lower() for name, _ in headers}
    return list(headers) + [(n, v) for n, v in extra if n.lower() not in present]
