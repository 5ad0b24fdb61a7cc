"""What the synchronous and the asyncio clients share: the decision, the
reservation and the settlement, the errors, the requests' encoding and the
answers' decoding; and what both middlewares answer themselves."""

from __future__ import annotations

import json
import os
import ssl
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

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


@dataclass(frozen=True)
class Reservation:
    """floodgate's answer to a reserve: when `admitted`, the estimate has
    been taken from the subject's limits and `reservation` is the id to
    settle with (None when denied, and when a fallback decision admitted
    without keeping a reservation)."""

    admitted: bool
    reservation: Optional[str]
    remaining: Optional[int]  # units left in the binding limit (after the estimate, when admitted)
    reset_after_ms: Optional[int]  # until the binding limit is fully reset
    rule: str
    key: str
    status: int  # 200 admitted, 429 denied
    retry_after_ms: Optional[int] = None  # 0 when admitted; -1: never (over the limit's size)
    limit: Optional[int] = None  # the binding limit's size
    fallback: Optional[str] = None  # "backend_error" or "store_full"; None for a real decision
    rate_limit_policy: Optional[str] = None  # the RateLimit-Policy field, when floodgate sent it
    rate_limit: Optional[str] = None  # the RateLimit field, when floodgate sent it
    retry_after: Optional[str] = None  # the Retry-After field (seconds), when denied
    body: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def headers(self) -> List[Tuple[str, str]]:
        """RateLimit-Policy, RateLimit and Retry-After as floodgate sent
        them; RateLimit and (when denied) Retry-After made from
        `remaining` and `reset_after_ms` when it sent none."""
        rate_limit, retry_after = self.rate_limit, self.retry_after
        if rate_limit is None and self.remaining is not None and self.reset_after_ms is not None:
            rate_limit = (f'"{_sf_string(self.rule)}";r={max(0, self.remaining)};'
                          f"t={ceil_seconds(self.reset_after_ms)}")
        if retry_after is None and not self.admitted:
            ms = self.retry_after_ms if self.retry_after_ms is not None else self.reset_after_ms
            if ms is not None and ms >= 0:
                retry_after = str(ceil_seconds(ms))
        out = []
        for name, value in ((POLICY_FIELD, self.rate_limit_policy), (STATE_FIELD, rate_limit),
                            (RETRY_FIELD, retry_after)):
            if value is not None:
                out.append((name, value))
        return out


@dataclass(frozen=True)
class Settlement:
    """floodgate's answer to a settle."""

    charged: int  # what the reservation finally cost the subject
    remaining: int  # units left in the binding limit; negative: the subject is in debt
    body: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def ceil_seconds(ms: int) -> int:
    """Milliseconds to whole seconds, rounded up; 0 for 0 or less (as floodgate's HTTP front)."""
    return 0 if ms <= 0 else (ms + 999) // 1000


def _sf_string(text: str) -> str:
    """A structured-field string's content: \\ and " escaped, non-ASCII as ?."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif 0x20 <= ord(ch) <= 0x7E:
            out.append(ch)
        else:
            out.append("?" * len(ch.encode("utf-8")))
    return "".join(out)


class Endpoint:
    """Where floodgate's HTTP front is: scheme, host, port, the path it is
    under and the check's path."""

    def __init__(self, url: Optional[str]):
        self.url = url or os.environ.get("FLOODGATE_URL") or DEFAULT_URL
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"floodgate URL must be http://host[:port] or https://host[:port], "
                             f"not {self.url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.base = parts.path.rstrip("/")
        self.path = self.base + "/v1/check"
        default_port = 443 if self.https else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_field = host if self.port == default_port else f"{host}:{self.port}"

    def reservations_path(self) -> str:
        return self.base + "/v1/reservations"

    def settle_path(self, rule: str, key: str, reservation: str) -> str:
        quote = lambda part: urllib.parse.quote(part, safe="")  # noqa: E731
        return (f"{self.base}/v1/reservations/{quote(rule)}/{quote(key)}/"
                f"{quote(reservation)}/settle")


def tls_context(endpoint: Endpoint, ca_file: Optional[str], cert_file: Optional[str],
                key_file: Optional[str],
                ssl_context: Optional[ssl.SSLContext]) -> Optional[ssl.SSLContext]:
    """The context for an https:// endpoint (None for http://): `ssl_context`
    as given, else one that verifies floodgate's certificate against
    `ca_file` (default: the system's CAs) and presents `cert_file` (with
    `key_file`, or the key in the same file) when floodgate asks for one.
    Every file is read here, so a bad one fails the client's construction,
    not its first check."""
    given = [name for name, v in (("ca_file", ca_file), ("cert_file", cert_file),
                                  ("key_file", key_file), ("ssl_context", ssl_context))
             if v is not None]
    if not endpoint.https:
        # TLS asked for and a plaintext URL: refuse rather than send in clear.
        if given:
            raise ValueError(f"{', '.join(given)} given for the plaintext URL {endpoint.url!r}: "
                             "use https://")
        return None
    if ssl_context is not None:
        if len(given) > 1:
            raise ValueError("ssl_context or ca_file/cert_file/key_file, not both: "
                             "load the files into the context")
        return ssl_context
    if key_file is not None and cert_file is None:
        raise ValueError("key_file without cert_file")
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load ca_file {ca_file!r}: {_reason(e)}") from e
    if cert_file is not None:
        try:
            ctx.load_cert_chain(cert_file, key_file)
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot load cert_file {cert_file!r}"
                             + (f" with key_file {key_file!r}" if key_file else "")
                             + f": {_reason(e)}") from e
    return ctx


def _reason(e: BaseException) -> str:
    # OSError's str() is "[Errno 2] No such file or directory" without
    # the path, which the message already names.
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e)


# The alerts a server sends when it wants a client certificate and got none,
# or got one its client CAs did not sign (TLS 1.3, then 1.2).
_CLIENT_CERT_REFUSED = {"TLSV13_ALERT_CERTIFICATE_REQUIRED", "TLSV1_ALERT_UNKNOWN_CA",
                        "SSLV3_ALERT_BAD_CERTIFICATE", "SSLV3_ALERT_HANDSHAKE_FAILURE"}
_CLIENT_CERT_HINT = ("does it require a client certificate (cert_file, key_file) that its "
                     "client_ca_file signed?")


def closed_before_answer(url: str, https: bool, e: BaseException) -> UnavailableError:
    """A new connection closed before floodgate answered. A TLS 1.3 server
    checks the client's certificate after the client's handshake is over,
    and its alert can be lost to the reset that follows: then such a close
    is all the client sees of a refusal."""
    if https:
        return UnavailableError(f"floodgate at {url} ended the TLS connection before answering "
                                f"({e or 'closed'}): {_CLIENT_CERT_HINT}")
    return UnavailableError(f"floodgate at {url} closed the connection"
                            + (f": {e}" if str(e) else ""))


def tls_failure(url: str, e: ssl.SSLError) -> UnavailableError:
    """The error for a TLS failure, saying what to check."""
    if isinstance(e, ssl.SSLCertVerificationError):
        msg = (f"floodgate at {url}: TLS handshake failed: floodgate's certificate was not "
               f"accepted: {e.verify_message}; is ca_file the CA that signed it, and the URL's "
               "host one of its names?")
    elif e.reason in _CLIENT_CERT_REFUSED:
        msg = (f"floodgate at {url}: TLS: floodgate refused this client ({e.reason}): "
               + _CLIENT_CERT_HINT)
    elif e.reason == "WRONG_VERSION_NUMBER":
        msg = (f"floodgate at {url}: TLS handshake failed ({e.reason}): the port does not speak "
               "TLS (floodgate serves TLS on a front only when its listen_tls says so)")
    else:
        msg = f"floodgate at {url}: TLS failed: {e}"
    return UnavailableError(msg)


def token_or_env(token: Optional[str]) -> Optional[str]:
    return token if token is not None else (os.environ.get("FLOODGATE_TOKEN") or None)


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int")
    return value


def _json_bytes(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def encode_check(rule: str, key: str, cost: int, tier: Optional[str],
                 wait_ms: Optional[int], priority: Optional[str] = None) -> bytes:
    if not isinstance(rule, str) or not isinstance(key, str):
        raise TypeError("rule and key must be strings")
    body: Dict[str, Any] = {"rule": rule, "key": key, "cost": _int("cost", cost)}
    if tier is not None:
        body["tier"] = tier
    if priority is not None:
        body["priority"] = priority
    if wait_ms is not None:
        body["wait_ms"] = _int("wait_ms", wait_ms)
    return _json_bytes(body)


def encode_reserve(rule: str, key: str, estimate: int, ttl_ms: Optional[int],
                   tier: Optional[str], priority: Optional[str]) -> bytes:
    """POST /v1/reservations's body."""
    if not isinstance(rule, str) or not isinstance(key, str):
        raise TypeError("rule and key must be strings")
    body: Dict[str, Any] = {"rule": rule, "key": key, "estimate": _int("estimate", estimate)}
    if ttl_ms is not None:
        body["ttl_ms"] = _int("ttl_ms", ttl_ms)
    if tier is not None:
        body["tier"] = tier
    if priority is not None:
        body["priority"] = priority
    return _json_bytes(body)


def encode_settle(rule: str, key: str, reservation: str, actual: int) -> bytes:
    """POST /v1/reservations/{rule}/{key}/{reservation}/settle's body."""
    if not all(isinstance(v, str) for v in (rule, key, reservation)):
        raise TypeError("rule, key and reservation must be strings")
    return _json_bytes({"actual": _int("actual", actual)})


def read_timeout(timeout: float, wait_ms: Optional[int]) -> float:
    """A held check (wait_ms) is answered by its deadline: wait that long more."""
    return timeout + (wait_ms or 0) / 1000.0


def decode_check(url: str, status: int, headers: Mapping[str, str], body: bytes) -> Decision:
    """The decision in a response to POST /v1/check, or the error it says.
    `headers` is looked up with lower-case names."""
    doc = _document(body)
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
    raise_for(url, status, doc, "a decision")


def _document(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        return None


def _optional_int(doc: Mapping[str, Any], name: str) -> Optional[int]:
    value = doc.get(name)
    return None if value is None else int(value)


def raise_for(url: str, status: int, doc: Any, what: str) -> None:
    """The error an answer without `what` means: RequestError for a 4xx
    problem (floodgate refused), else UnavailableError."""
    if 400 <= status < 500 and isinstance(doc, dict):
        raise RequestError(status, str(doc.get("title", "")), str(doc.get("detail", "")))
    detail = doc.get("detail", "") if isinstance(doc, dict) else ""
    if status >= 500:
        raise UnavailableError(f"floodgate at {url} answered {status}"
                               + (f": {detail}" if detail else ""), status)
    raise UnavailableError(f"floodgate at {url} answered {status} without {what}; "
                           f"is it floodgate's HTTP front?", status)


def decode_reserve(url: str, status: int, headers: Mapping[str, str],
                   body: bytes) -> Reservation:
    """The reservation in a response to POST /v1/reservations (200
    admitted, 429 denied), or the error it says."""
    doc = _document(body)
    if isinstance(doc, dict) and status in (200, 429) and (
            "reservation" in doc or "remaining" in doc or status == 429):
        try:
            admitted = status == 200 and bool(doc.get("allowed", True))
            reservation = doc.get("reservation") if admitted else None
            return Reservation(
                admitted=admitted,
                reservation=str(reservation) if reservation else None,
                remaining=_optional_int(doc, "remaining"),
                reset_after_ms=_optional_int(doc, "reset_after_ms"),
                retry_after_ms=_optional_int(doc, "retry_after_ms"),
                limit=_optional_int(doc, "limit"),
                fallback=doc.get("fallback"),
                rule=str(doc.get("rule", "")),
                key=str(doc.get("key", "")),
                status=status,
                rate_limit_policy=headers.get("ratelimit-policy"),
                rate_limit=headers.get("ratelimit"),
                retry_after=headers.get("retry-after"),
                body=doc,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise UnavailableError(f"floodgate at {url} sent a reservation without {e}", status)
    raise_for(url, status, doc, "a reservation")
    raise AssertionError("unreachable")


def decode_settle(url: str, status: int, headers: Mapping[str, str], body: bytes) -> Settlement:
    """The settlement in a response to POST .../settle, or the error it says
    (RequestError for a reservation unknown, expired, another key's or
    settled already)."""
    doc = _document(body)
    if isinstance(doc, dict) and status == 200:
        try:
            return Settlement(charged=int(doc["charged"]), remaining=int(doc["remaining"]),
                              body=doc)
        except (KeyError, TypeError, ValueError) as e:
            raise UnavailableError(f"floodgate at {url} sent a settlement without {e}", status)
    raise_for(url, status, doc, "a settlement")
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------
# What both middlewares answer themselves.

ON_ERROR = ("allow", "deny")


DEFAULT_MAX_BODY = 1 << 20

# What a settle callback is given: the environ (WSGI) or scope (ASGI), the
# response's status, its header fields (str pairs) and its body (None when
# it was longer than Reserve.max_body); what it gives: the units the
# request really cost, or None for its estimate.
SettleCallback = Callable[[dict, int, List[Tuple[str, str]], Optional[bytes]], Any]


@dataclass(frozen=True)
class Reserve:
    """The middleware's `reserve=`: reserve `estimate` units before the
    application runs (in place of a check), and settle what the request
    really cost once its response is complete.

    estimate: an int >= 1, or environ/scope -> int (async allowed in ASGI).
    settle:   (environ or scope, status, headers, body) -> int or None, e.g.
              openai_usage (async allowed in ASGI). None (the callback, or
              what it returns) settles at the estimate, as does a response
              that failed (the application raised, the client went away).
    ttl_ms:   until an unsettled reservation settles at its estimate by
              itself; floodgate's default is 5 minutes.
    max_body: the most bytes of the response kept for `settle` (only when
              `settle` is given); past it `body` is None.
    """

    estimate: Union[int, Callable[[dict], Any]]
    settle: Optional[SettleCallback] = None
    ttl_ms: Optional[int] = None
    max_body: int = DEFAULT_MAX_BODY


@dataclass(frozen=True)
class SettleOutcome:
    """How the middleware settled one reservation, for its `on_settle`."""

    rule: str
    key: str
    reservation: str
    estimate: int
    actual: int  # what was settled: the settle callback's figure, or the estimate
    from_response: bool  # False: the estimate, as a fallback
    settlement: Optional[Settlement] = None  # floodgate's answer; None when the settle failed
    error: Optional[BaseException] = None  # why it failed


def openai_usage(request: Any, status: int, headers: List[Tuple[str, str]],
                 body: Optional[bytes]) -> Optional[int]:
    """The ready settle callback for OpenAI-style JSON responses: the body's
    `usage.total_tokens`. None (settle at the estimate) for a body that is
    not JSON (an event stream), longer than Reserve.max_body, or without
    that figure."""
    if body is None:
        return None
    content_type = next((v for n, v in headers if n.lower() == "content-type"), "")
    if "json" not in content_type.lower():
        return None
    doc = _document(body)
    usage = doc.get("usage") if isinstance(doc, dict) else None
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not total >= 0:
        return None
    return total


def settle_amount(actual: Any, estimate: int) -> Tuple[int, bool]:
    """What to settle: the callback's figure rounded up when it is a number
    >= 0, else the estimate; and whether it was the callback's."""
    if isinstance(actual, bool) or not isinstance(actual, (int, float)) or not actual >= 0 \
            or actual == float("inf"):
        return estimate, False
    return int(-(-actual // 1)), True


class BodyTap:
    """The first `limit` bytes of a response body, and its status and
    fields, as they pass; `body()` is None past the limit."""

    def __init__(self, limit: int):
        self.limit = limit
        self.status = 0
        self.headers: List[Tuple[str, str]] = []
        self.chunks: List[bytes] = []
        self.size = 0
        self.overflow = False

    def keep(self, chunk: bytes) -> None:
        if self.overflow or not chunk:
            return
        self.size += len(chunk)
        if self.size > self.limit:
            self.overflow = True
            self.chunks = []
            return
        self.chunks.append(bytes(chunk))

    def body(self) -> Optional[bytes]:
        return None if self.overflow else b"".join(self.chunks)


class Middleware:
    """What the WSGI and ASGI middleware are both given: the app they wrap,
    the rule, how a request makes its key, cost, tier and priority, the
    client, what to do when floodgate is unreachable, how long a check may
    wait, and whether to reserve instead of checking."""

    def __init__(self, app, rule, key, cost, tier, client, on_error, wait_ms, priority=None,
                 reserve=None, on_settle=None):
        self.app = app
        self.rule = rule
        self.key = key
        self.cost = cost
        self.tier = tier
        self.priority = priority
        self.client = client
        self.on_error = check_on_error(on_error)
        self.wait_ms = wait_ms
        if reserve is not None:
            if not isinstance(reserve, Reserve):
                raise TypeError("reserve must be a floodgate_client.Reserve")
            if cost != 1 or wait_ms is not None:
                raise ValueError("reserve takes the estimate for the cost and cannot wait: "
                                 "not with cost or wait_ms")
        self.reserve = reserve
        self.on_settle = on_settle


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


def reservation_denial(r: Reservation, estimate: int) -> Tuple[int, List[Tuple[str, str]], bytes]:
    """429 for a reservation that does not fit, as denial() for a check."""
    headers = r.headers
    retry = next((v for n, v in headers if n == RETRY_FIELD), None)
    detail = f"Too many requests: an estimate of {estimate} does not fit"
    detail += f"; retry after {retry} s." if retry is not None else "."
    body = problem(429, "Too Many Requests", detail)
    return 429, [("Content-Type", "application/problem+json"),
                 ("Content-Length", str(len(body)))] + headers, body


def admitted_fields(d: Union[Decision, Reservation]) -> List[Tuple[str, str]]:
    """What an admitted response gains: RateLimit-Policy and RateLimit."""
    return [(n, v) for n, v in d.headers if n != RETRY_FIELD]


def add_missing(headers: List[Tuple[str, str]],
                extra: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """`headers` plus those of `extra` whose name the app did not set."""
    present = {name.lower() for name, _ in headers}
    return list(headers) + [(n, v) for n, v in extra if n.lower() not in present]
