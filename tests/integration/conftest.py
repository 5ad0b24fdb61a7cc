"""Fixtures for floodgate's integration tests.

These tests start the real `floodgate serve` binary on free ports (port 0 on
both fronts; the ports are read from the "listening" log line) and drive it
with real clients: redis-cli, redis-py, ioredis, curl, redis-benchmark and
nginx.

The binary is $FLOODGATE_BIN, else the first of build/release, build/dev,
build/debug (under the repository root) that exists. Run with Debian's
interpreter, which sees the apt packages python3-pytest and python3-redis:

    FLOODGATE_BIN=$PWD/build/release/floodgate /usr/bin/python3 -m pytest -q tests/integration
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SOURCE_DIR = Path(os.environ.get("FLOODGATE_SOURCE_DIR", HERE.parent.parent)).resolve()

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


# --------------------------------------------------------------------------
# Tools


def require_tool(name: str, package: str) -> str:
    """The absolute path of an executable; the test FAILS (not skips) without it."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.access(p, os.X_OK)), None
    )
    if path is None:
        pytest.fail(f"'{name}' is not installed: install the Debian package '{package}' "
                    f"(apt-get install -y {package}; scripts/setup.sh does it)", pytrace=False)
    return path


def find_binary() -> Path:
    env = os.environ.get("FLOODGATE_BIN")
    if env:
        path = Path(env)
        if not path.is_file() or not os.access(path, os.X_OK):
            pytest.fail(f"FLOODGATE_BIN={env} is not an executable file", pytrace=False)
        return path
    for preset in ("release", "dev", "debug"):
        path = SOURCE_DIR / "build" / preset / "floodgate"
        if path.is_file() and os.access(path, os.X_OK):
            return path
    pytest.fail("no floodgate binary: set FLOODGATE_BIN or build one "
                "(cmake --preset release && cmake --build --preset release)", pytrace=False)


@pytest.fixture(scope="session")
def floodgate_bin() -> Path:
    path = find_binary()
    # A binary from before `serve` existed would make every test fail
    # obscurely: say so once, clearly.
    out = subprocess.run([str(path), "serve", "--help"], capture_output=True, text=True, timeout=10)
    if out.returncode != 0 or "--resp" not in out.stdout + out.stderr:
        pytest.fail(f"{path} has no usable 'serve' subcommand:\n{out.stdout}{out.stderr}",
                    pytrace=False)
    return path


# --------------------------------------------------------------------------
# Time windows


def until(condition, timeout_s: float = 10.0, what: str = "the condition",
          every_s: float = 0.01):
    """Polls `condition` until it returns a true value, which is returned;
    fails the test if `timeout_s` passes first. For what another thread or
    process does: a slow machine only takes longer."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(every_s)


def avoid_window_edge(period_s: float, margin_s: float = 3.0) -> None:
    """Sleeps past the next epoch-aligned boundary of `period_s` when it is
    closer than `margin_s`, so that a test counting requests in one window
    cannot straddle two windows."""
    now = time.time()
    to_edge = period_s - (now % period_s)
    if to_edge < margin_s:
        time.sleep(to_edge + 0.05)


# --------------------------------------------------------------------------
# The server


LISTENING_RE = re.compile(r"\bmsg=listening\b")


def logfmt(line: str) -> dict[str, str]:
    """Parses one logfmt line (values may be double-quoted with \\-escapes)."""
    out: dict[str, str] = {}
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] == " ":
            i += 1
        j = i
        while j < n and line[j] not in "= ":
            j += 1
        key = line[i:j]
        if j >= n or line[j] != "=":
            if key:
                out[key] = ""
            i = j
            continue
        j += 1
        if j < n and line[j] == '"':
            j += 1
            val = []
            while j < n and line[j] != '"':
                if line[j] == "\\" and j + 1 < n:
                    j += 1
                    val.append({"n": "\n"}.get(line[j], line[j]))
                else:
                    val.append(line[j])
                j += 1
            out[key] = "".join(val)
            i = j + 1
        else:
            k = j
            while k < n and line[k] != " ":
                k += 1
            out[key] = line[j:k]
            i = k
    return out


def port_of(address: str) -> int | None:
    if not address:
        return None
    return int(address.rsplit(":", 1)[1])


class Floodgate:
    """One `floodgate serve` process. Its stderr is read by a thread into
    `lines` so that tests can wait for and assert on log lines."""

    def __init__(self, binary: Path, config_path: Path | None, args: list[str], env: dict | None,
                 wait_listening: bool = True, prefix: list[str] | None = None,
                 cwd: Path | None = None):
        self.config_path = config_path
        # `prefix` runs the binary under a command that execs it (prlimit …),
        # so that the process and its pid stay the server's. No config_path:
        # no --config (serve's default).
        config_args = [] if config_path is None else ["--config", str(config_path)]
        self.cmd = [*(prefix or []), str(binary), "serve", *config_args, *args]
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=cwd)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.resp_port: int | None = None
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self.listening: dict[str, str] = {}
        if wait_listening:
            line = self.wait_for(LISTENING_RE, START_TIMEOUT_S)
            if line is None:
                self.kill()
                pytest.fail(f"floodgate did not log msg=listening within {START_TIMEOUT_S} s "
                            f"(exit {self.proc.poll()}); cmd: {' '.join(self.cmd)}\nstderr:\n"
                            + self.stderr_text(), pytrace=False)
            self.listening = logfmt(line)
            self.resp_port = port_of(self.listening.get("resp", ""))
            self.http_port = port_of(self.listening.get("http", ""))
            self.grpc_port = port_of(self.listening.get("grpc", ""))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def stderr_text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_for(self, pattern, timeout: float = 5.0, start: int = 0) -> str | None:
        """The first stderr line from index `start` on matching `pattern`."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines[start:]:
                    if regex.search(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return None
                self._cond.wait(left)

    def line_count(self) -> int:
        with self._cond:
            return len(self.lines)

    def wait_exit(self, timeout: float) -> int | None:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(timeout=2)
        return code

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Sends `sig` and asserts a clean exit (code 0) within STOP_TIMEOUT_S."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        start = time.monotonic()
        code = self.wait_exit(STOP_TIMEOUT_S)
        if code is None:
            self.kill()
            pytest.fail(f"floodgate did not exit within {STOP_TIMEOUT_S} s of "
                        f"{signal.Signals(sig).name}; stderr:\n{self.stderr_text()}", pytrace=False)
        assert code == 0, (f"floodgate exited {code} after {signal.Signals(sig).name} "
                           f"(want 0); stderr:\n{self.stderr_text()}")
        self.stop_seconds = time.monotonic() - start
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def reload(self, config_text: str) -> int:
        """Rewrites the config file and sends SIGHUP; returns the log line
        count before the signal, for wait_for(..., start=...)."""
        self.config_path.write_text(config_text)
        mark = self.line_count()
        self.send_signal(signal.SIGHUP)
        return mark


@pytest.fixture
def tmp_dir():
    d = Path(tempfile.mkdtemp(prefix="floodgate-itest-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def start_server(floodgate_bin, tmp_dir):
    """start_server(config_text, *, threads=2, extra_args=(), env=None, resp=..., http=...,
    grpc=None, prefix=None) -> a running Floodgate (grpc="127.0.0.1:0" starts the Envoy gRPC front on a
    free port). Every server still running at the end of the
    test is stopped with SIGTERM, which must give exit code 0 within 5 s."""
    servers: list[Floodgate] = []
    counter = [0]

    def start(config_text: str, *, threads: int = 2, extra_args=(), env: dict | None = None,
              resp: str = "127.0.0.1:0", http: str = "127.0.0.1:0",
              grpc: str | None = None, wait_listening: bool = True,
              prefix: list[str] | None = None) -> Floodgate:
        counter[0] += 1
        path = tmp_dir / f"floodgate-{counter[0]}.yaml"
        path.write_text(config_text)
        args = ["--resp", resp, "--http", http, "--threads", str(threads), *extra_args]
        if grpc is not None:
            args += ["--grpc", grpc]
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        server = Floodgate(floodgate_bin, path, args, full_env, wait_listening=wait_listening,
                           prefix=prefix)
        servers.append(server)
        return server

    yield start

    failures = []
    for server in servers:
        if server.proc.poll() is not None:
            server.wait_exit(2)
            continue
        try:
            server.stop()
        except BaseException as e:  # report every server, then fail once
            failures.append(str(e))
    for server in servers:
        text = server.stderr_text()
        if "AddressSanitizer" in text or "ThreadSanitizer" in text or "runtime error:" in text:
            failures.append("sanitizer report in floodgate's stderr:\n" + text)
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


# --------------------------------------------------------------------------
# Raw RESP


class RespError(Exception):
    pass


class RespConn:
    """A minimal RESP2 client over a raw socket, for byte-exact tests."""

    def __init__(self, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    @staticmethod
    def encode(*args) -> bytes:
        out = b"*%d\r\n" % len(args)
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(b), b)
        return out

    def command(self, *args):
        self.send(self.encode(*args))
        return self.read_reply()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by floodgate")
        self.buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read_reply(self):
        """Simple strings as str, errors as RespError (returned, not raised),
        integers as int, bulk as bytes (None for null), arrays as lists."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read_reply() for _ in range(n)]
        raise AssertionError(f"not a RESP reply: {line!r}")

    def read_until_closed(self, timeout: float = 5.0) -> bytes:
        """Everything left on the connection until the server closes it;
        fails if it is still open after `timeout`."""
        self.sock.settimeout(timeout)
        data = self.buf
        self.buf = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return data
                data += chunk
        except socket.timeout:
            raise AssertionError(f"floodgate kept the connection open for {timeout} s; "
                                 f"received {data!r}")
        except ConnectionResetError:
            return data


@pytest.fixture
def resp_conn():
    """resp_conn(port) -> RespConn, closed at the end of the test."""
    conns: list[RespConn] = []

    def make(port: int, timeout: float = 5.0) -> RespConn:
        c = RespConn(port, timeout)
        conns.append(c)
        return c

    yield make
    for c in conns:
        try:
            c.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# HTTP via curl


class CurlResponse:
    def __init__(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def json(self):
        import json
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<{self.status} {self.headers} {self.body[:400]!r}>"


def parse_http_response(raw: bytes) -> tuple[CurlResponse, bytes]:
    """Parses one HTTP/1.1 response with a Content-Length; returns it and the rest."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    assert sep, f"no end of header section in {raw[:300]!r}"
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    assert status_line[0] in ("HTTP/1.1", "HTTP/1.0"), lines[0]
    headers = []
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.append((k.strip(), v.strip()))
    resp = CurlResponse(int(status_line[1]), status_line[2] if len(status_line) > 2 else "",
                        headers, b"")
    length = resp.header("content-length")
    assert length is not None, f"no Content-Length in {head!r}"
    n = int(length)
    assert len(rest) >= n, f"body shorter than Content-Length {n}: {rest!r}"
    resp.body = rest[:n]
    return resp, rest[n:]


def http_get(port: int, path: str, timeout: float = 5.0) -> CurlResponse:
    """One GET over a fresh raw socket (Connection: close), for tests that
    must not depend on a client's own pooling or retries."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    return parse_http_response(raw)[0]


@pytest.fixture(scope="session")
def curl_bin() -> str:
    return require_tool("curl", "curl")


@pytest.fixture
def curl(curl_bin):
    """curl(url, *extra_args, method=None, data=None) -> CurlResponse (the last
    response when curl followed none: we never pass -L)."""

    def run(url: str, *extra: str, method: str | None = None, data: str | None = None,
            headers: dict[str, str] | None = None) -> CurlResponse:
        cmd = [curl_bin, "-s", "-i", "--max-time", "10"]
        if method:
            cmd += ["-X", method]
        if data is not None:
            cmd += ["--data-binary", data]
        for k, v in (headers or {}).items():
            cmd += ["-H", f"{k}: {v}"]
        cmd += [*extra, url]
        out = subprocess.run(cmd, capture_output=True, timeout=20)
        assert out.returncode == 0, f"curl failed ({out.returncode}): {out.stderr!r}; {cmd}"
        raw = out.stdout
        # Skip interim responses (100 Continue).
        while raw.startswith(b"HTTP/1.1 100"):
            raw = raw.split(b"\r\n\r\n", 1)[1]
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        headers_out = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers_out.append((k.strip(), v.strip()))
        return CurlResponse(int(parts[1]), parts[2] if len(parts) > 2 else "", headers_out, body)

    return run


def sanitized(pid: int) -> bool:
    """Whether the server runs a sanitizer's allocator, which keeps freed
    memory in quarantine: its RSS is not glibc's heap."""
    with open(f"/proc/{pid}/maps") as f:
        return any(("libasan" in line or "libtsan" in line) for line in f)


def metric_value(text: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    """The value of one sample in Prometheus text, or None."""
    want = labels or {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if got == want:
            return float(m.group(4))
    return None


# --------------------------------------------------------------------------
# A gRPC client: Node's @grpc/grpc-js (tests/integration/node_grpc)

NODE_GRPC_DIR = HERE / "node_grpc"


@pytest.fixture(scope="session")
def node_ready():
    """The node binary, once tests/integration/node_grpc has its packages."""
    node = shutil.which("node") or "/usr/bin/node"
    npm = shutil.which("npm") or "/usr/bin/npm"
    if not (os.access(node, os.X_OK) and os.access(npm, os.X_OK)):
        pytest.fail("node and npm are required (Debian: apt-get install -y nodejs npm)",
                    pytrace=False)
    if not (NODE_GRPC_DIR / "node_modules" / "@grpc" / "grpc-js" / "package.json").is_file():
        out = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_GRPC_DIR,
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            pytest.fail(f"npm ci in {NODE_GRPC_DIR} failed (the npm registry must be "
                        f"reachable):\n{out.stdout}\n{out.stderr}", pytrace=False)
    return node


# --------------------------------------------------------------------------
# nginx (examples/nginx), started on a free port


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


@pytest.fixture
def nginx(tmp_dir):
    """nginx(conf_for_port) -> (port, stop): conf_for_port(port, prefix) is
    the config's text; stop() ends it and returns its stderr. Every nginx
    still running at the end is stopped."""
    binary = require_tool("nginx", "nginx-light")
    running = []

    def stop(proc) -> str:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        text = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        return text

    def start(conf_for_port):
        prefix = tmp_dir / f"nginx-{len(running)}"
        prefix.mkdir()
        err = ""
        for _attempt in range(3):  # the free port may be taken between probe and bind
            port = free_port()
            (prefix / "nginx.conf").write_text(conf_for_port(port, prefix))
            proc = subprocess.Popen([binary, "-p", str(prefix), "-c", str(prefix / "nginx.conf"),
                                     "-g", "master_process off;"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            running.append(proc)
            if wait_port(port, proc):
                return port, lambda: stop(proc)
            err = stop(proc)
        pytest.fail(f"nginx did not start: {err}", pytrace=False)

    yield start
    for proc in running:
        if proc.poll() is None:
            stop(proc)


# --------------------------------------------------------------------------
# Real redis-server processes (the Redis store's backend)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server on a free port in its own directory; stop()/start()
    to simulate an outage on the same port. debug=True allows DEBUG SLEEP
    (a stalled server)."""

    def __init__(self, directory: Path, debug: bool = False):
        self.binary = require_tool("redis-server", "redis-server")
        self.debug = debug
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--logfile", str(self.dir / "log"),
             *(["--enable-debug-command", "yes"] if self.debug else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        pytest.fail(f"redis-server did not start on port {self.port}", pytrace=False)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
        self.proc = None

    def client(self):
        import redis  # python3-redis
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)



def start_nutcracker(tmp_dir: Path, backends, *, timeout_ms: int = 1000, eject: bool = False,
                     extra: str = "") -> tuple[subprocess.Popen, int]:
    """Twemproxy (nutcracker) in front of `backends` (RedisServer), hashing
    as floodgate's docs say (fnv1a_64, ketama, the "{}" hash tag), with
    auto_eject_hosts as `eject` and `extra` pool lines. Returns the process
    and its port once it answers a SET; the caller kills it."""
    binary = require_tool("nutcracker", "nutcracker")
    port = free_port()
    conf = tmp_dir / "nutcracker.yml"
    conf.write_text(
        "floodgate:\n"
        f"  listen: 127.0.0.1:{port}\n"
        "  hash: fnv1a_64\n  hash_tag: \"{}\"\n  distribution: ketama\n  redis: true\n"
        f"  timeout: {timeout_ms}\n  auto_eject_hosts: {'true' if eject else 'false'}\n"
        + extra + "  servers:\n"
        + "".join(f"   - 127.0.0.1:{b.port}:1 s{i}\n" for i, b in enumerate(backends)))
    proc = subprocess.Popen([binary, "-c", str(conf), "-o", str(tmp_dir / "nutcracker.log"),
                             "-s", str(free_port()), "-a", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"*3\r\n$3\r\nSET\r\n$5\r\nprobe\r\n$1\r\n1\r\n")
                if s.recv(16).startswith(b"+OK"):
                    return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("nutcracker did not start", pytrace=False)
        time.sleep(0.05)


@pytest.fixture
def redis_server(tmp_dir):
    servers: list[RedisServer] = []

    def make(debug: bool = False) -> RedisServer:
        server = RedisServer(tmp_dir / f"redis-{len(servers)}", debug=debug)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


class Receiver:
    """tests/integration/http_receiver.py as a process (a stand-in webhook, SMS or
    e-mail gateway), on a given port or a free one; records every POST."""

    def __init__(self, *args, port=0):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "http_receiver.py"), "--port", str(port), *args],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("listening "), line
        self.port = int(line.split()[1])
        self.records = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.records.append(json.loads(line))
                self._cond.notify_all()

    def wait_for(self, n, timeout=15.0):
        """The records once there are at least n, or after timeout seconds."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.records) >= n, timeout)
            return list(self.records)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)


@pytest.fixture
def receiver():
    """receiver(*args, port=0) -> a running Receiver, stopped after the test."""
    made = []

    def make(*args, port=0):
        r = Receiver(*args, port=port)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()
