"""What a reload and check-config tell the operator must be true: a config
with no rules is refused at start, at reload and by check-config (an empty
file saved by mistake keeps the old rules serving); a reload that removes
rules or changes restart-only settings says so; check-config names a
duration's real problem, a data_dir serve cannot use, and block_for; the
example config's header gives commands that work as written
(docs/operations.md, "Signals")."""
import os
import re
import shlex
import subprocess

import pytest

from conftest import SOURCE_DIR, Floodgate, http_get
from test_control_plane import http

RULES = """\
rules:
  api: { algorithm: fixed_window, limits: [100/hour] }
  login: { algorithm: sliding_window, limits: [5/hour], block_for: 15m }
"""


def check_config(floodgate_bin, path) -> subprocess.CompletedProcess:
    return subprocess.run([str(floodgate_bin), "check-config", str(path)], capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize("text", ["", "# nothing here yet\n", "rules: {}\n", "store: memory\n"])
def test_a_reload_to_a_file_with_no_rules_keeps_the_old_ones(start_server, text):
    server = start_server(RULES)
    assert http_get(server.http_port, "/v1/check?rule=api&key=k").status == 200
    mark = server.reload(text)
    line = server.wait_for(r"reload refused|config reloaded", start=mark)
    assert line is not None and "reload refused" in line and "no rules" in line, line
    assert http_get(server.http_port, "/v1/check?rule=api&key=k").status == 200
    assert http_get(server.http_port, "/v1/check?rule=login&key=k").status == 200


@pytest.mark.parametrize("text", ["", "# nothing here yet\n", "rules: {}\n"])
def test_check_config_and_serve_refuse_a_file_with_no_rules(floodgate_bin, tmp_dir, text):
    path = tmp_dir / "empty.yaml"
    path.write_text(text)
    out = check_config(floodgate_bin, path)
    assert out.returncode == 1, out.stdout
    assert "no rules" in out.stderr and "OK" not in out.stdout
    server = Floodgate(floodgate_bin, path, ["--http", "127.0.0.1:0", "--resp", "127.0.0.1:0",
                                             "--grpc", "off"], dict(os.environ),
                       wait_listening=False)
    assert server.wait_exit(10) == 1
    assert "no rules" in server.stderr_text()


def test_a_reload_that_removes_a_rule_says_which(start_server):
    server = start_server(RULES)
    mark = server.reload("rules:\n  api: { algorithm: fixed_window, limits: [100/hour] }\n")
    line = server.wait_for(r"reload removed rules", start=mark)
    assert line is not None and "rules=login" in line, server.stderr_text()
    assert http_get(server.http_port, "/v1/check?rule=login&key=k").status == 404


def test_a_reload_names_the_settings_that_need_a_restart(start_server, tmp_dir):
    server = start_server(RULES)
    mark = server.reload(f"admin: {{ token_env: SOME_TOKEN }}\ndata_dir: {tmp_dir}/state\n"
                         + RULES.replace("100/hour", "2/hour"))
    line = server.wait_for(r"take effect only after a restart", start=mark)
    assert line is not None and "settings=admin,data_dir" in line, server.stderr_text()
    # The rules did change; the admin API still answers loopback without a token.
    http_get(server.http_port, "/v1/check?rule=api&key=k")
    http_get(server.http_port, "/v1/check?rule=api&key=k")
    assert http_get(server.http_port, "/v1/check?rule=api&key=k").status == 429
    assert http(server.http_port, "GET", "/v1/admin/blocks")[0] == 200
    # A reload that changes only rules names no setting.
    mark = server.reload(f"admin: {{ token_env: SOME_TOKEN }}\ndata_dir: {tmp_dir}/state\n"
                         + RULES)
    assert server.wait_for(r"config reloaded", start=mark) is not None
    assert server.wait_for(r"take effect only after a restart", timeout=1, start=mark) is not None
    mark = server.reload(RULES.replace("100/hour", "3/hour"))
    assert server.wait_for(r"config reloaded", start=mark) is not None
    assert server.wait_for(r"take effect only after a restart", timeout=1, start=mark) is None


@pytest.mark.parametrize("value,words", [
    ("100000d", "'rules.api.block_for' must be from 1ms to 366d (near '100000d')"),
    ("0s", "'rules.api.block_for' must be from 1ms to 366d (near '0s')"),
])
def test_check_config_names_a_block_for_out_of_range(floodgate_bin, tmp_dir, value, words):
    path = tmp_dir / "b.yaml"
    path.write_text(f"rules:\n  api: {{ algorithm: fixed_window, limits: [1/s], block_for: {value} }}\n")
    out = check_config(floodgate_bin, path)
    assert out.returncode == 1
    assert words in out.stderr, out.stderr


def test_check_config_shows_block_for(floodgate_bin, tmp_dir):
    path = tmp_dir / "b.yaml"
    path.write_text(RULES)
    out = check_config(floodgate_bin, path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"login: sliding_window 5/hour; block_for=15m;", out.stdout), out.stdout


def test_check_config_refuses_a_data_dir_serve_cannot_create(floodgate_bin, tmp_dir):
    path = tmp_dir / "d.yaml"
    path.write_text("data_dir: /nonexistent/floodgate/dir\n" + RULES)
    out = check_config(floodgate_bin, path)
    assert out.returncode == 1
    assert "data_dir /nonexistent/floodgate/dir does not exist" in out.stderr, out.stderr
    (tmp_dir / "afile").write_text("")
    path.write_text(f"data_dir: {tmp_dir}/afile\n" + RULES)
    out = check_config(floodgate_bin, path)
    assert out.returncode == 1 and "is not a directory" in out.stderr, out.stderr
    # One level serve creates itself is fine.
    path.write_text(f"data_dir: {tmp_dir}/new\n" + RULES)
    assert check_config(floodgate_bin, path).returncode == 0


def test_the_example_configs_serve_commands_work_as_written(floodgate_bin, tmp_dir):
    """examples/floodgate.yaml's header: the lines after "Serve with it:"
    run in a shell without FG_OTP_SECRET start the server (on free ports)."""
    header = (SOURCE_DIR / "examples" / "floodgate.yaml").read_text().split("\n\n")[0]
    lines = header.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("# Serve with it:"))
    commands = [lines[start].split(":", 1)[1].strip()]
    for l in lines[start + 1:]:
        if not re.match(r"#\s{4,}\S", l):
            break
        commands.append(l[1:].strip())
    script = "\n".join(commands)
    assert "FG_OTP_SECRET" in script, header
    script = script.replace("floodgate serve",
                            f"exec {shlex.quote(str(floodgate_bin))} serve --http 127.0.0.1:0 "
                            "--resp 127.0.0.1:0 --grpc off")
    env = {k: v for k, v in os.environ.items() if k != "FG_OTP_SECRET"}
    proc = subprocess.Popen(["bash", "-c", script], cwd=SOURCE_DIR, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        for line in proc.stderr:
            seen += line
            if "msg=listening" in line:
                break
        assert "msg=listening" in seen, seen
    finally:
        proc.terminate()
        proc.wait(10)
