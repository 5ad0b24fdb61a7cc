"""The RESP front driven by Node's ioredis (tests/integration/node)."""

import os
import shutil
import subprocess

import pytest

from conftest import HERE

NODE_DIR = HERE / "node"

CONFIG = """\
rules:
  api:   { algorithm: sliding_log, limits: [60/minute] }
  quota: { algorithm: token_bucket, limits: [25/hour] }
"""


def node_tools():
    node = shutil.which("node") or ("/usr/bin/node" if os.access("/usr/bin/node", os.X_OK) else None)
    npm = shutil.which("npm") or ("/usr/bin/npm" if os.access("/usr/bin/npm", os.X_OK) else None)
    if node is None or npm is None:
        pytest.fail("node and npm are required: install Node.js 18+ with npm "
                    "(Debian: apt-get install -y nodejs npm)", pytrace=False)
    return node, npm


@pytest.fixture(scope="module")
def node_ready():
    node, npm = node_tools()
    if not (NODE_DIR / "node_modules" / "ioredis" / "package.json").is_file():
        out = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            pytest.fail(f"npm ci in {NODE_DIR} failed (the npm registry must be reachable):\n"
                        f"{out.stdout}\n{out.stderr}", pytrace=False)
    return node


def test_ioredis(start_server, node_ready):
    plain = start_server(CONFIG)
    secured = start_server(CONFIG + 'server: { auth_token: "node-token" }\n')
    try:
        out = subprocess.run([node_ready, "ioredis_test.js", str(plain.resp_port),
                              str(secured.resp_port), "node-token"],
                             cwd=NODE_DIR, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"ioredis_test.js did not finish within 60 s:\n{e.stdout}\n{e.stderr}")
    assert out.returncode == 0, f"ioredis_test.js failed:\n{out.stdout}\n{out.stderr}"
    assert out.stdout.count("ok   ") == 7, out.stdout
