"""A user's first steps with the real binary: simulate on the example config
without the OTP secret, a front turned off in the config file, serve with no
--config outside the repository, and the OTP demo script."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import SOURCE_DIR, Floodgate, RespConn, RespError, http_get

EXAMPLE = SOURCE_DIR / "examples" / "floodgate.yaml"


def env_without(*names: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in names:
        env.pop(name, None)
    return env


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (from /proc: its socket inodes
    matched against the LISTEN entries of /proc/net/tcp and tcp6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


# --------------------------------------------------------------------------
# simulate does not need FG_OTP_SECRET


def simulate(floodgate_bin, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(floodgate_bin), "simulate", "--config", str(EXAMPLE), "--rule", "login",
         "--input", str(SOURCE_DIR / "examples" / "traffic.csv")],
        capture_output=True, text=True, timeout=30, env=env)


def test_simulate_runs_on_the_example_without_the_otp_secret(floodgate_bin):
    assert "otp:" in EXAMPLE.read_text()  # the example asks for OTP
    out = simulate(floodgate_bin, env_without("FG_OTP_SECRET"))
    assert out.returncode == 0, out.stderr
    assert "FG_OTP_SECRET" not in out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "timestamp_ms,key,cost,allowed,remaining,retry_after_ms"
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) == 18  # every event of examples/traffic.csv
    alice = [r for r in rows if r[1] == "alice"]
    bob = [r for r in rows if r[1] == "bob"]
    # login: GCRA 5/minute; alice's 12 attempts in 12 s: 5 at once, then
    # denied (one more only every 12 s). bob's, 15 s apart, all pass.
    assert [r[3] for r in alice] == ["1"] * 5 + ["0"] * 7
    assert [r[4] for r in alice[:5]] == ["4", "3", "2", "1", "0"]
    assert all(int(r[5]) > 0 for r in alice[5:])
    assert [r[3] for r in bob] == ["1"] * 6
    # The secret changes nothing in a simulation.
    with_secret = simulate(floodgate_bin, {**os.environ, "FG_OTP_SECRET": "x" * 32})
    assert with_secret.returncode == 0
    assert with_secret.stdout == out.stdout


# --------------------------------------------------------------------------
# listen: { http: off } in the file


def test_listen_http_off_in_the_file_serves_resp_only(floodgate_bin, tmp_dir):
    config = tmp_dir / "resp-only.yaml"
    config.write_text("listen: { http: off, resp: 127.0.0.1:0 }\n"
                      "rules:\n  api: { limits: 2/minute }\n")
    # No --http on the command line: the file alone turns HTTP off.
    server = Floodgate(floodgate_bin, config, ["--threads", "1"], dict(os.environ))
    try:
        assert server.listening.get("http") == ""
        assert server.http_port is None
        assert server.resp_port
        with RespConn(server.resp_port) as c:
            assert c.command("FG.CHECK", "api", "u")[0] == 1
            assert c.command("FG.CHECK", "api", "u")[0] == 1
            assert c.command("FG.CHECK", "api", "u")[0] == 0
        assert listening_ports(server.proc.pid) == {server.resp_port}
    finally:
        server.stop()


def test_listen_off_spellings_and_a_bad_address_in_check_config(floodgate_bin, tmp_dir):
    good = tmp_dir / "off.yaml"
    good.write_text("listen: { http: off, resp: 127.0.0.1:0, grpc: false }\n"
                    "rules: { api: { algorithm: fixed_window, limits: [1/s] } }\n")
    out = subprocess.run([str(floodgate_bin), "check-config", str(good)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    bad = tmp_dir / "bad.yaml"
    bad.write_text("listen: { http: nowhere }\n")
    out = subprocess.run([str(floodgate_bin), "check-config", str(bad)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 1
    assert ("'listen.http' must be host:port, e.g. 127.0.0.1:8080, or off (near 'nowhere')"
            in out.stderr)


# --------------------------------------------------------------------------
# serve with no --config, outside the repository


def serve_without_config(floodgate_bin, cwd: Path, env: dict) -> Floodgate:
    return Floodgate(floodgate_bin, None,
                     ["--resp", "127.0.0.1:0", "--http", "127.0.0.1:0", "--threads", "1"], env,
                     cwd=cwd)


def test_serve_without_config_outside_the_repository_serves_the_example_rules(
        floodgate_bin, tmp_dir):
    assert not (tmp_dir / "examples").exists()
    if Path("/etc/floodgate/floodgate.yaml").exists():
        pytest.fail("/etc/floodgate/floodgate.yaml exists here: serve would read it", pytrace=False)
    server = serve_without_config(floodgate_bin, tmp_dir, env_without("FG_OTP_SECRET"))
    try:
        text = server.stderr_text()
        assert ('msg="no --config given: serving the built-in example rules '
                '(examples/floodgate.yaml); --config FILE serves yours" config=built-in') in text
        # The example's otp section, without its secret: OTP off, said so.
        assert re.search(r'level=warn msg="OTP is off: FG_OTP_SECRET is not set', text), text
        want_rules = len(re.findall(r"^  [a-z_]+:\s*$", EXAMPLE.read_text().split("\nrules:\n")[1]
                                    .split("\n\n# ")[0], re.M))
        assert server.listening["rules"] == str(want_rules)
        with RespConn(server.resp_port) as c:
            # The example's api rule (60/minute) and login rule (5/minute).
            assert c.command("FG.CHECK", "api", "user:1")[:3] == [1, 60, 59]
            assert c.command("FG.CHECK", "login", "user:1")[:3] == [1, 5, 4]
            refused = c.command("FG.OTP.ISSUE", "+15550100")
            assert isinstance(refused, RespError), refused
        assert http_get(server.http_port, "/healthz").status == 200
        # SIGHUP: no file to reload; said, and it keeps serving.
        mark = server.line_count()
        server.send_signal(signal.SIGHUP)
        assert server.wait_for("SIGHUP ignored: no --config file to reload", 5, start=mark)
        with RespConn(server.resp_port) as c:
            assert c.command("FG.CHECK", "api", "user:1")[:3] == [1, 60, 58]
    finally:
        server.stop()


def test_serve_without_config_with_the_otp_secret_runs_the_example_otp(floodgate_bin, tmp_dir):
    server = serve_without_config(floodgate_bin, tmp_dir,
                                  {**os.environ, "FG_OTP_SECRET": "s" * 32})
    try:
        assert "OTP is off" not in server.stderr_text()
        with RespConn(server.resp_port) as c:
            code = c.command("FG.OTP.ISSUE", "+15550100")
            assert isinstance(code, bytes) and re.fullmatch(rb"\d{6}", code), code
    finally:
        server.stop(signal.SIGTERM)


# --------------------------------------------------------------------------
# examples/otp/demo.sh


def test_the_otp_demo_script_runs_twice_at_once_on_free_ports(floodgate_bin, tmp_dir):
    # Two at once, from another directory: each server on a port of its own.
    env = {**os.environ, "FLOODGATE_BIN": str(floodgate_bin)}
    env.pop("FG_OTP_SECRET", None)  # the script makes its own
    runs = [subprocess.Popen(["bash", str(SOURCE_DIR / "examples" / "otp" / "demo.sh")],
                             cwd=tmp_dir, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = []
    for run in runs:
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err + out
        outputs.append(out)
    ports = set()
    for out in outputs:
        ports.update(re.findall(r"http://127\.0\.0\.1:(\d+)/", out))
        code = re.search(r'"code":"(\d{6})"', out)
        assert code, out
        verdicts = re.findall(r'"valid":(true|false)\}   <- HTTP 200', out)
        assert verdicts == ["false", "true", "false"], out  # wrong, right, replay
        assert "HTTP/1.1 429 Too Many Requests" in out
        assert re.search(r"^Retry-After: \d+$", out, re.M)
        counts = re.findall(r'"count":(\d+)', out)
        assert counts == ["2", "1"], out  # req-a expired by itself
        assert "floodgate_otp_issued_total 3" in out
        assert "floodgate_otp_issue_limited_total 1" in out
        assert 'floodgate_otp_verifications_total{result="valid"} 1' in out
        assert 'floodgate_otp_verifications_total{result="invalid"} 2' in out
    assert len(ports) == 2 and "0" not in ports, ports
    # Both servers were stopped by the script: nothing listens there now.
    for port in ports:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()


def test_the_otp_demo_script_says_why_when_the_server_cannot_start(tmp_dir):
    env = {**os.environ, "FLOODGATE_BIN": "/bin/false"}
    out = subprocess.run(["bash", str(SOURCE_DIR / "examples" / "otp" / "demo.sh")], cwd=tmp_dir,
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "floodgate did not start" in out.stderr
