"""The synchronous client: POST /v1/check (and the reservations' routes)
over kept-alive http.client connections, shared safely by any number of
threads."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from typing import Dict, List, Optional, Tuple

from ._common import (DEFAULT_TIMEOUT, Decision, Endpoint, Reservation, Settlement,
                      UnavailableError, closed_before_answer, decode_check, decode_reserve,
                      decode_settle, encode_check, encode_reserve, encode_settle, read_timeout,
                      tls_context, tls_failure, token_or_env)

# What a kept-alive connection the server has meanwhile closed looks like
# when it is used again: nothing of the request was read, so sending it
# again on a new connection counts it once. (Over TLS, a close without
# close_notify is an SSLEOFError.)
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
          ConnectionAbortedError, ssl.SSLEOFError)


class Client:
    """A client of floodgate's HTTP front.

    `url` defaults to $FLOODGATE_URL, else http://127.0.0.1:8080; `token`
    (sent as `Authorization: Bearer`) to $FLOODGATE_TOKEN. `timeout` bounds
    connecting and each answer, in seconds. Connections are kept alive and
    reused; at most `max_idle` idle ones are kept. One Client may be used by
    many threads at once.

    An https:// URL is TLS (floodgate's `listen_tls.http`); floodgate's
    certificate is always verified: against `ca_file` (PEM; default the
    system's CAs), or as `ssl_context` says. `cert_file` and `key_file`
    (PEM) are the client certificate for a floodgate that asks for one
    (`client_ca_file`). TLS options with an http:// URL are refused.
    """

    def __init__(self, url: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT,
                 token: Optional[str] = None, max_idle: int = 16, *,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                 key_file: Optional[str] = None, ssl_context: Optional[ssl.SSLContext] = None):
        self._endpoint = Endpoint(url)
        self._ssl_context = tls_context(self._endpoint, ca_file, cert_file, key_file, ssl_context)
        self.url = self._endpoint.url
        self.timeout = timeout
        self._max_idle = max_idle
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        token = token_or_env(token)
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def check(self, rule: str, key: str, cost: int = 1, tier: Optional[str] = None,
              wait_ms: Optional[int] = None, priority: Optional[str] = None) -> Decision:
        """May `key` spend `cost` of `rule` (in `tier`) now? With `wait_ms`,
        floodgate may hold a request it would deny until it can be admitted,
        for at most that long; `priority` names the rule's priority class of
        the request ("critical", "default", "batch", ...). Raises
        RequestError when floodgate refuses the check (unknown rule, bad
        argument) and UnavailableError when it cannot be asked."""
        body = encode_check(rule, key, cost, tier, wait_ms, priority)
        status, headers, data = self._post(self._endpoint.path, body,
                                           read_timeout(self.timeout, wait_ms))
        return decode_check(self.url, status, headers, data)

    def reserve(self, rule: str, key: str, estimate: int, ttl_ms: Optional[int] = None,
                tier: Optional[str] = None, priority: Optional[str] = None) -> Reservation:
        """Take `estimate` units of `rule` for `key` now, when they fit, to
        settle() with what the work really cost once that is known. A
        reservation not settled within `ttl_ms` (floodgate's default 5
        minutes) settles at its estimate. Errors as check()."""
        body = encode_reserve(rule, key, estimate, ttl_ms, tier, priority)
        status, headers, data = self._post(self._endpoint.reservations_path(), body,
                                           self.timeout)
        return decode_reserve(self.url, status, headers, data)

    def settle(self, rule: str, key: str, reservation: str, actual: int) -> Settlement:
        """The reservation cost `actual` units (an int >= 0): the difference
        from its estimate is charged or given back. Raises RequestError for
        a reservation unknown, expired, another key's or settled already,
        with floodgate's message."""
        body = encode_settle(rule, key, reservation, actual)
        status, headers, data = self._post(
            self._endpoint.settle_path(rule, key, reservation), body, self.timeout)
        return decode_settle(self.url, status, headers, data)

    def _post(self, path: str, body: bytes, timeout: float) -> Tuple[int, Dict[str, str], bytes]:
        """POST `body` to `path`: the status, the fields (lower-case names)
        and the body of the answer."""
        while True:
            conn, reused = self._take()
            try:
                if conn.sock is None:
                    conn.connect()
                conn.sock.settimeout(timeout)
                conn.request("POST", path, body, self._headers)
                resp = conn.getresponse()
                data = resp.read()
            except _STALE as e:
                conn.close()
                if reused:
                    continue  # the server closed it while idle: once more on a new one
                raise closed_before_answer(self.url, self._endpoint.https, e) from e
            except (socket.timeout, TimeoutError) as e:
                conn.close()
                raise UnavailableError(
                    f"floodgate at {self.url} did not answer within {timeout:g} s") from e
            except ssl.SSLError as e:
                conn.close()
                raise tls_failure(self.url, e) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise UnavailableError(f"floodgate at {self.url} is unreachable: {e}") from e
            except BaseException:
                conn.close()
                raise
            if resp.will_close:
                conn.close()
            else:
                self._give(conn)
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data

    def close(self) -> None:
        """Closes the idle connections; connections in use close when done."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _take(self) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        e = self._endpoint
        if e.https:
            return http.client.HTTPSConnection(e.host, e.port, timeout=self.timeout,
                                               context=self._ssl_context), False
        return http.client.HTTPConnection(e.host, e.port, timeout=self.timeout), False

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()


_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The Client the module-level check() uses: $FLOODGATE_URL (else
    http://127.0.0.1:8080), made at the first call."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


def check(rule: str, key: str, cost: int = 1, tier: Optional[str] = None,
          wait_ms: Optional[int] = None, priority: Optional[str] = None) -> Decision:
    """Client.check on the default client."""
    return default_client().check(rule, key, cost=cost, tier=tier, wait_ms=wait_ms,
                                  priority=priority)
