"""What the synchronous and the asyncio clients share: the decision, the
errors, the request's encoding and the answer's decoding."""

from __future__ import annotations

import json
import os
import ssl
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
