"""The asyncio client: POST /v1/check (and the reservations' routes) over
kept-alive asyncio streams, for ASGI applications and other asyncio code.
Standard library only."""

from __future__ import annotations

import asyncio
import ssl
from typing import Dict, List, Optional, Tuple

from ._common import (DEFAULT_TIMEOUT, Decision, Endpoint, Reservation, Settlement,
                      UnavailableError, closed_before_answer, decode_check, decode_reserve,
                      decode_settle, encode_check, encode_reserve, encode_settle, read_timeout,
                      tls_context, tls_failure, token_or_env)

_MAX_HEADER_LINES = 100
_MAX_LINE = 16384
_MAX_BODY = 1 << 20


class _Stale(Exception):
    """A kept-alive connection was closed before any byte of the answer."""


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # already closed, or its loop is gone
            pass


class AsyncClient:
    """The asyncio counterpart of Client: `await client.check(...)`.

    Same arguments as Client (TLS included), plus `max_connections`, the
    most connections open at once (further checks wait for one). A client
    belongs to the event loop that first uses it; its connections are not
    shared across loops (a check from another loop starts afresh there).
    """

    def __init__(self, url: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT,
                 token: Optional[str] = None, max_connections: int = 64, *,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                 key_file: Optional[str] = None, ssl_context: Optional[ssl.SSLContext] = None):
        self._endpoint = Endpoint(url)
        self._ssl_context = tls_context(self._endpoint, ca_file, cert_file, key_file, ssl_context)
        self.url = self._endpoint.url
        self.timeout = timeout
        self._max_connections = max_connections
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._idle: List[_Conn] = []
        self._slots: Optional[asyncio.Semaphore] = None
        token = token_or_env(token)
        e = self._endpoint
        # The request's fields after its request line.
        fields = (f"Host: {e.host_field}\r\n"
                  "Content-Type: application/json\r\nAccept: application/json\r\n")
        if token:
            fields += f"Authorization: Bearer {token}\r\n"
        self._fields = fields.encode("latin-1")

    async def check(self, rule: str, key: str, cost: int = 1, tier: Optional[str] = None,
                    wait_ms: Optional[int] = None, priority: Optional[str] = None) -> Decision:
        """As Client.check."""
        body = encode_check(rule, key, cost, tier, wait_ms, priority)
        status, headers, data = await self._post(self._endpoint.path, body,
                                                 read_timeout(self.timeout, wait_ms))
        return decode_check(self.url, status, headers, data)

    async def reserve(self, rule: str, key: str, estimate: int, ttl_ms: Optional[int] = None,
                      tier: Optional[str] = None,
                      priority: Optional[str] = None) -> Reservation:
        """As Client.reserve."""
        body = encode_reserve(rule, key, estimate, ttl_ms, tier, priority)
        status, headers, data = await self._post(self._endpoint.reservations_path(), body,
                                                 self.timeout)
        return decode_reserve(self.url, status, headers, data)

    async def settle(self, rule: str, key: str, reservation: str, actual: int) -> Settlement:
        """As Client.settle."""
        body = encode_settle(rule, key, reservation, actual)
        status, headers, data = await self._post(
            self._endpoint.settle_path(rule, key, reservation), body, self.timeout)
        return decode_settle(self.url, status, headers, data)

    async def _post(self, path: str, body: bytes,
                    timeout: float) -> Tuple[int, Dict[str, str], bytes]:
        """POST `body` to `path`: the status, the fields (lower-case names)
        and the body of the answer."""
        request = (b"POST %s HTTP/1.1\r\n" % path.encode("latin-1") + self._fields
                   + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self._bind()
        assert self._slots is not None
        async with self._slots:
            while True:
                conn, reused = await self._take()
                try:
                    status, headers, data, keep = await asyncio.wait_for(
                        self._exchange(conn, request), timeout)
                except _Stale as e:
                    conn.close()
                    if reused:
                        continue  # the server closed it while idle: once more on a new one
                    raise closed_before_answer(self.url, self._endpoint.https,
                                               e.__cause__ or e) from e
                except asyncio.TimeoutError as e:
                    conn.close()
                    raise UnavailableError(
                        f"floodgate at {self.url} did not answer within {timeout:g} s") from e
                except ssl.SSLError as e:
                    conn.close()
                    raise tls_failure(self.url, e) from e
                except (OSError, ValueError, asyncio.IncompleteReadError,
                        asyncio.LimitOverrunError) as e:
                    conn.close()
                    raise UnavailableError(
                        f"floodgate at {self.url} failed mid-answer: {e!r}") from e
                except BaseException:
                    conn.close()
                    raise
                if keep:
                    self._idle.append(conn)
                else:
                    conn.close()
                return status, headers, data

    async def aclose(self) -> None:
        """Closes the idle connections."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            try:
                await conn.writer.wait_closed()
            except Exception:
                pass

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Streams and semaphores belong to one loop: start afresh on this one.
            for conn in self._idle:
                conn.close()
            self._idle = []
            self._loop = loop
            self._slots = asyncio.Semaphore(self._max_connections)

    async def _take(self) -> Tuple[_Conn, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn, True
            conn.close()
        e = self._endpoint
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(e.host, e.port, ssl=self._ssl_context, limit=_MAX_LINE),
                self.timeout)
        except asyncio.TimeoutError as err:
            raise UnavailableError(
                f"floodgate at {self.url} did not accept a connection within "
                f"{self.timeout:g} s") from err
        except ssl.SSLError as err:
            raise tls_failure(self.url, err) from err
        except OSError as err:
            raise UnavailableError(f"floodgate at {self.url} is unreachable: {err}") from err
        return _Conn(reader, writer), False

    @staticmethod
    async def _exchange(conn: _Conn,
                        request: bytes) -> Tuple[int, Dict[str, str], bytes, bool]:
        try:
            conn.writer.write(request)
            await conn.writer.drain()
            status_line = await conn.reader.readline()
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                ssl.SSLEOFError) as e:
            raise _Stale() from e
        if not status_line:
            raise _Stale()
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
        status = int(parts[1])
        headers: Dict[str, str] = {}
        for _ in range(_MAX_HEADER_LINES):
            line = await conn.reader.readline()
            if not line.endswith(b"\n"):
                raise asyncio.IncompleteReadError(line, None)
            if line in (b"\r\n", b"\n"):
                break
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise ValueError(f"bad header line: {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        else:
            raise ValueError("too many header lines")
        keep = headers.get("connection", "").lower() != "close" and parts[0] == "HTTP/1.1"
        if "content-length" in headers:
            length = int(headers["content-length"])
            if length < 0 or length > _MAX_BODY:
                raise ValueError(f"Content-Length {length}")
            body = await conn.reader.readexactly(length)
        else:
            body = b""  # to the end of the connection
            while len(body) <= _MAX_BODY:
                chunk = await conn.reader.read(65536)
                if not chunk:
                    break
                body += chunk
            keep = False
        return status, headers, body, keep
