"""docs/control-plane.md's examples run as written: every sh block is run
with bash against a server started with the page's config, only the ports
replaced by the server's own. Each curl answer must be JSON and not a
problem; each redis-cli answer must not be an error."""
import json
import os
import re
import subprocess

from conftest import require_tool

DOC = os.path.join(os.environ.get("FLOODGATE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                   "docs", "control-plane.md")


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(r"```" + lang + r"\n(.*?)```", text, re.S)


def test_the_control_plane_examples_run_as_written(start_server):
    require_tool("curl", "curl")
    require_tool("redis-cli", "redis-tools")
    text = open(DOC).read()
    examples = text.split("## Examples", 1)[1]
    config = blocks(examples, "yaml")[0]
    server = start_server(config)
    scripts = blocks(examples, "sh")
    assert len(scripts) >= 5, scripts
    ran = 0
    for script in scripts:
        script = script.replace("localhost:8080", f"localhost:{server.http_port}")
        script = script.replace("-p 6479", f"-p {server.resp_port}")
        # One command per logical line (a trailing backslash continues it).
        for command in re.split(r"(?<!\\)\n", script.strip()):
            out = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                 timeout=20)
            assert out.returncode == 0, (command, out.stderr)
            answer = out.stdout.strip()
            if command.startswith("curl"):
                body = json.loads(answer)
                assert "status" not in body or body.get("status", 200) < 400, (command, body)
            else:
                assert "ERR" not in answer and "NOPERM" not in answer, (command, answer)
            ran += 1
    assert ran >= 15
    # And they did what the page says: the override and the runtime rule are there.
    log = subprocess.run(["curl", "-s", f"localhost:{server.http_port}/v1/admin/log?limit=100"],
                         capture_output=True, text=True).stdout
    actions = [e["action"] for e in json.loads(log)["entries"]]
    for action in ("override.set", "block.set", "block.delete", "rule.put", "override.delete"):
        assert action in actions, actions
