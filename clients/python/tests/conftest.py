"""Fixtures for floodgate_client's tests: a live `floodgate serve` on a free
port with a few rules, in clear or over TLS with a throwaway CA made by the
openssl CLI, and a recording proxy in front of it that keeps every answer
floodgate sent, so that tests can compare what the package and the
middleware pass on with what floodgate itself said. `transport` runs a test
once in clear and once over TLS.

The binary is $FLOODGATE_BIN, else build/release/floodgate. Run with
Debian's interpreter (python3-pytest, python3-flask, python3-starlette,
python3-uvicorn):

    FLOODGATE_BIN=$PWD/build/release/floodgate /usr/bin/python3 -m pytest -q clients/python/tests
"""

from __future__ import annotations

import json
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
from typing import Dict, Optional

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
  # Reservations: fixed windows of a day, so that what was charged is what
  # is used whatever the clock does within a test (short of midnight UTC).
  tokens:  { algorithm: fixed_window, limits: [1000/day] }
  small:   { algorithm: fixed_window, limits: [100/day] }
  shed:
    algorithm: sliding_log
    limits: [10/minute]
    priorities: { critical: 0%, default: 20%, batch: 40% }
"""


def find_binary() -> Path:
    env = os.environ.get("FLOODGATE_BIN")
    path = Path(env) if env else REPO / "build" / "release" / "floodgate"
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"no floodgate binary at {path}: set FLOODGATE_BIN or build one "
                    "(cmake --preset release && cmake --build --preset release "
                    "--target floodgate_cli)", pytrace=False)
    return path


class Certs:
    """A throwaway CA in `dir`, made with the openssl CLI: the server's
    certificate (for 127.0.0.1 and localhost), a client certificate it
    signed, and a second CA with a client certificate of its own, which
    floodgate must not trust. Attributes are file paths."""

    def __init__(self, dir: Path):
        self.dir = dir

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], check=True, timeout=30,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

        def ca(name: str) -> None:
            # 30 days: floodgate warns about a certificate that expires within 14.
            openssl("req", "-x509", *ec, "-keyout", str(dir / f"{name}.key"),
                    "-out", str(dir / f"{name}.pem"), "-days", "30",
                    "-subj", f"/CN=floodgate-test-{name}")

        def leaf(name: str, signer: str, cn: str, ext: Optional[str] = None) -> None:
            openssl("req", *ec, "-keyout", str(dir / f"{name}.key"),
                    "-out", str(dir / f"{name}.csr"), "-subj", f"/CN={cn}")
            more = []
            if ext is not None:
                (dir / f"{name}.ext").write_text(ext)
                more = ["-extfile", str(dir / f"{name}.ext")]
            openssl("x509", "-req", "-in", str(dir / f"{name}.csr"),
                    "-CA", str(dir / f"{signer}.pem"), "-CAkey", str(dir / f"{signer}.key"),
                    "-CAcreateserial", "-days", "30", "-out", str(dir / f"{name}.pem"), *more)

        ca("ca")
        ca("other-ca")
        leaf("server", "ca", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        leaf("client", "ca", "floodgate-test-client")
        leaf("rogue", "other-ca", "floodgate-test-rogue")
        self.ca = str(dir / "ca.pem")
        self.other_ca = str(dir / "other-ca.pem")
        self.server_cert, self.server_key = str(dir / "server.pem"), str(dir / "server.key")
        self.cert, self.key = str(dir / "client.pem"), str(dir / "client.key")
        self.rogue_cert, self.rogue_key = str(dir / "rogue.pem"), str(dir / "rogue.key")


class Floodgate:
    """One `floodgate serve` with only the HTTP front (and with `resp` the
    RESP front too, for a Node app beside it), on a free port. With
    `certs`, over TLS, asking clients for a certificate their CA signed
    (and refusing those without with `require_client_cert`)."""

    def __init__(self, config: str, certs: Optional[Certs] = None,
                 require_client_cert: bool = False, resp: bool = False):
        self.dir = Path(tempfile.mkdtemp(prefix="floodgate-pyclient-"))
        cfg = self.dir / "floodgate.yaml"
        if certs is not None:
            config = (f"tls: {{ cert_file: {json.dumps(certs.server_cert)}, "
                      f"key_file: {json.dumps(certs.server_key)}, "
                      f"client_ca_file: {json.dumps(certs.ca)}, "
                      f"require_client_cert: {json.dumps(require_client_cert)} }}\n"
                      "listen_tls: { http: true }\n" + config)
        cfg.write_text(config)
        scheme = "https" if certs is not None else "http"
        self.proc = subprocess.Popen(
            [str(find_binary()), "serve", "--config", str(cfg), "--http", "127.0.0.1:0",
             "--resp", "127.0.0.1:0" if resp else "off", "--threads", "2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.port = None
        self.resp_port = None
        ready = threading.Event()

        def read() -> None:
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                m = re.search(r"\bmsg=listening\b.*\bhttp=\S*:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    r = re.search(r"\bresp=\S*:(\d+)", line)
                    self.resp_port = int(r.group(1)) if r else None
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(10) or self.port is None:
            self.proc.kill()
            pytest.fail("floodgate did not start:\n" + "\n".join(self.lines), pytrace=False)
        self.url = f"{scheme}://127.0.0.1:{self.port}"

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
    counts the connections it was given. Over TLS (`scheme` "https") it
    only relays and counts: the bytes are not its to read."""

    def __init__(self, port: int, scheme: str = "http"):
        self.upstream = port
        self.record = scheme == "http"
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"{scheme}://127.0.0.1:{self.port}"
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
            threading.Thread(target=self._pump, args=(up, down, self.record),
                             daemon=True).start()

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


@pytest.fixture(scope="session")
def resp_floodgate():
    server = Floodgate(CONFIG, resp=True)
    yield server
    server.stop()


@pytest.fixture
def proxy(floodgate):
    p = RecordingProxy(floodgate.port)
    yield p
    p.close()


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def tls_floodgate(certs):
    """floodgate's HTTP front over TLS; a client certificate is asked for,
    not required."""
    server = Floodgate(CONFIG, certs)
    yield server
    server.stop()


class Transport:
    """How a test reaches floodgate: `url`, and the TLS arguments a Client
    or AsyncClient takes to get there ({} in clear)."""

    def __init__(self, server: Floodgate, tls: Dict[str, str]):
        self.server = server
        self.url = server.url
        self.tls = tls
        self.scheme = "https" if tls else "http"


@pytest.fixture(params=["http", "https"])
def transport(request):
    """The test once in clear, once over TLS (verified against the test CA)."""
    if request.param == "http":
        return Transport(request.getfixturevalue("floodgate"), {})
    certs = request.getfixturevalue("certs")
    return Transport(request.getfixturevalue("tls_floodgate"), {"ca_file": certs.ca})


@pytest.fixture
def transport_proxy(transport):
    """A RecordingProxy to the transport's floodgate (relaying only, over TLS)."""
    p = RecordingProxy(transport.server.port, transport.scheme)
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


def used(url: str, rule: str, key: str, limit: int) -> int:
    """What `key` has used of `rule`'s (one) limit: a check of cost 0 peeks."""
    from floodgate_client import Client
    with Client(url) as c:
        return limit - c.check(rule, key, cost=0).remaining


def elapsed(f):
    start = time.monotonic()
    out = f()
    return out, time.monotonic() - start
