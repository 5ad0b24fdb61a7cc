"""`floodgate --version`: the project's version and the commit it was built at."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from conftest import SOURCE_DIR, http_get


def project_version() -> str:
    text = (SOURCE_DIR / "CMakeLists.txt").read_text()
    m = re.search(r"project\(floodgate VERSION (\d+\.\d+\.\d+)", text)
    assert m, "no project(floodgate VERSION x.y.z) in CMakeLists.txt"
    return m.group(1)


def test_version_names_the_version_and_the_commit(floodgate_bin):
    out = subprocess.run([str(floodgate_bin), "--version"], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr
    m = re.fullmatch(r"floodgate (\d+\.\d+\.\d+) \(([0-9a-f]{4,40}|unknown)\)\n", out.stdout)
    assert m, f"unexpected --version output: {out.stdout!r}"
    assert m.group(1) == project_version()
    git = shutil.which("git")
    head = None
    if git is not None:
        rev = subprocess.run([git, "-C", str(SOURCE_DIR), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if rev.returncode == 0:
            head = rev.stdout.strip()
    if head is not None:
        # Built from this checkout: the commit it is at now (read at build time).
        assert m.group(2) == head, (
            f"{floodgate_bin} was built at {m.group(2)}, the checkout is at {head}: rebuild it")
    else:
        assert m.group(2) == "unknown"


def run_version_script(source_dir, output):
    subprocess.run(["cmake", f"-DSOURCE_DIR={source_dir}", "-DVERSION=1.2.3", f"-DOUTPUT={output}",
                    "-P", str(SOURCE_DIR / "cmake" / "version.cmake")], check=True, timeout=30)


def test_version_source_outside_a_checkout_says_unknown(tmp_path):
    out = tmp_path / "version.cc"
    run_version_script(tmp_path, out)
    text = out.read_text()
    assert 'kVersion[] = "1.2.3"' in text
    assert 'kCommit[] = "unknown"' in text


def test_version_source_is_rewritten_only_when_it_changes(tmp_path):
    out = tmp_path / "version.cc"
    run_version_script(SOURCE_DIR, out)
    out.touch()
    touched = out.stat().st_mtime_ns
    run_version_script(SOURCE_DIR, out)
    assert out.stat().st_mtime_ns == touched  # same text: left alone
    out.write_text("stale\n")
    run_version_script(SOURCE_DIR, out)
    assert 'kVersion[] = "1.2.3"' in out.read_text()


def test_the_server_reports_the_same_version(start_server):
    server = start_server("rules:\n  api: { algorithm: fixed_window, limits: 5/minute }\n")
    r = http_get(server.http_port, "/v1/admin/stats")
    assert r.status == 200, r.body
    assert json.loads(r.body)["version"] == project_version()
