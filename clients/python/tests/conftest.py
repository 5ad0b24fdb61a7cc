"""Fixtures for floodgate_client's tests: a live `floodgate serve` on a free
port with a few rules, and a recording proxy in front of it that keeps every
answer floodgate sent, so that tests can compare what the package and the
middleware pass on with what floodgate itself said.

The binary is $FLOODGATE_BIN, else build/release/floodgate. Run with
Debian's interpreter (python3-pytest, python3-flask, python3-starlette,
python3-uvicorn):

    FLOODGATE_BIN=$PWD/build/release/floodgate /usr/bin/python3 -m pytest -q clients/python/tests
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# The package from the source tree, not an installed copy.
sys.path.insert(0, str(HERE.parent / "src"))

REPO = HERE.parent.parent.parent

CONFIG = """
rules:
  five:    { algorithm: sliding_log, limits: [5/minute] }
  tiered:  { algorithm: sliding_log, limits: [5/minute], tiers: { pro: [50/minute] } }
  hundred: { algorithm: sliding_log, limits: [100/hour] }
  paced:   { algorithm: gcra, limits: [1/2s] }
"""


def find_binary() -> Path:
    env = os.environ.get("FLOODGATE_BIN")
    path = Path(env) if env else REPO / "build" / "release" / "floodgate"
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"no floodgate binary at {path}: set FLOODGATE_BIN or build one "
                    "(cmake --preset release && cmake --build --preset release "
                    "--target floodgate_cli)", pytrace=False)
    return path


class Floodgate:
    """One `floodgate serve` with only the HTTP front, on a free port."""

    def __init__(self, config: str):
        self.dir = Path(tempfile.mkdtemp(prefix="floodgate-pyclient-"))
        cfg = self.dir / "floodgate.yaml"
        cfg.write_text(config)
        self.proc = subprocess.Popen(
            [str(find_binary()), "serve", "--config", str(cfg), "--http", "127.0.0.1:0",
             "--resp", "off", "--threads", "2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.port = None
        ready = threading.Event()

        def read() -> None:
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                m = re.search(r"\bmsg=listening\b.*\bhttp=\S*:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(10) or self.port is None:
            self.proc.kill()
            pytest.fail("floodgate did not start:\n" + "\n".join(self.lines), pytrace=False)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                code = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                code = None
            assert code == 0, f"floodgate exited {code}:\n" + "\n".join(self.lines)
        shutil.rmtree(self.dir, ignore_errors=True)


class RecordingProxy:
    """A TCP relay to floodgate that parses and records each HTTP response
    floodgate sends (status and header fields) before passing it on, and
    counts the connections it was given."""

    def __init__(self, port: int):
        self.upstream = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.responses: list[tuple[int, dict[str, str]]] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.socks: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.upstream))
            with self.lock:
                self.connections += 1
                self.socks += [down, up]
            threading.Thread(target=self._pump, args=(down, up, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        buf = b""
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                if record:
                    buf += chunk
                    buf = self._record(buf)
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _record(self, buf: bytes) -> bytes:
        while b"\r\n\r\n" in buf:
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            fields = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
            length = int(fields.get("content-length", "0"))
            if len(rest) < length:
                break
            with self.lock:
                self.responses.append((int(lines[0].split(" ")[1]), fields))
            buf = rest[length:]
        return buf

    def last(self) -> tuple[int, dict[str, str]]:
        with self.lock:
            assert self.responses, "floodgate sent nothing through the proxy"
            return self.responses[-1]

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass


@pytest.fixture(scope="session")
def floodgate():
    server = Floodgate(CONFIG)
    yield server
    server.stop()


@pytest.fixture
def proxy(floodgate):
    p = RecordingProxy(floodgate.port)
    yield p
    p.close()


@pytest.fixture
def key():
    """A subject no other test uses."""
    return "k-" + uuid.uuid4().hex


def dead_url() -> str:
    """A URL where nothing listens (a port bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def silent_server():
    """A URL whose server accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                accepted.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    t.join(2)
    listener.close()
    for c in accepted:
        c.close()


def elapsed(f):
    start = time.monotonic()
    out = f()
    return out, time.monotonic() - start
