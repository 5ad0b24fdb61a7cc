"""The example apps of examples/llm-python (Flask) and examples/llm-node
(Express) as their READMEs run them, each a process of its own against the
live floodgate: a completion is admitted and its API key charged
usage.total_tokens (not the estimate reserved before it ran), and a request
whose estimate does not fit in what is left is refused with 429."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import used

ROOT = Path(__file__).resolve().parents[3]
TOKENS_LIMIT = 1000  # conftest.CONFIG's `tokens` rule: 1000/day


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], env: dict, port: int, cwd: Path) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, env={**os.environ, **env}, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{cmd} exited {proc.returncode}:\n{proc.stderr.read()}", pytrace=False)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    pytest.fail(f"{cmd} did not listen on 127.0.0.1:{port} within 20 s", pytrace=False)


def complete(port: int, api_key: str, max_tokens: int, content: str) -> tuple[int, dict]:
    body = json.dumps({"max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": content}]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                 headers={"Authorization": api_key,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {}


def exercise(port: int, floodgate_url: str) -> None:
    api_key = f"Bearer {uuid.uuid4().hex}"
    status, doc = complete(port, api_key, 500, "hello there, how are you")
    assert status == 200, doc
    total = doc["usage"]["total_tokens"]
    assert 0 < total < 500 + 10
    # Settled after the response has gone: give it a moment.
    deadline = time.monotonic() + 5
    while used(floodgate_url, "tokens", api_key, TOKENS_LIMIT) != total and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert used(floodgate_url, "tokens", api_key, TOKENS_LIMIT) == total
    # An estimate (prompt + max_tokens) past what is left: refused, nothing charged.
    status, _ = complete(port, api_key, 2000, "a long one")
    assert status == 429
    assert used(floodgate_url, "tokens", api_key, TOKENS_LIMIT) == total


def test_the_flask_example(floodgate):
    port = free_port()
    app = start([sys.executable, "app.py"],
                {"PYTHONPATH": str(ROOT / "clients" / "python" / "src"), "PORT": str(port),
                 "FLOODGATE_URL": floodgate.url},
                port, ROOT / "examples" / "llm-python")
    try:
        exercise(port, floodgate.url)
    finally:
        app.terminate()
        app.wait(10)


def test_the_express_example(floodgate, resp_floodgate):
    node = shutil.which("node") or "/usr/bin/node"
    modules = ROOT / "clients" / "node" / "node_modules"
    if not (modules / "express").is_dir() or not (ROOT / "clients" / "node" / "dist").is_dir():
        pytest.fail("clients/node needs `npm ci && npm run build` (scripts/setup.sh)",
                    pytrace=False)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        # The example's `npm install` links floodgate-client from clients/node;
        # NODE_PATH does the same without writing into the source tree.
        (Path(tmp) / "floodgate-client").symlink_to(ROOT / "clients" / "node")
        app = start([node, "server.js"],
                    {"NODE_PATH": f"{tmp}:{modules}", "PORT": str(port),
                     "FLOODGATE_RESP_PORT": str(resp_floodgate.resp_port)},
                    port, ROOT / "examples" / "llm-node")
        try:
            exercise(port, resp_floodgate.url)
        finally:
            app.terminate()
            app.wait(10)
