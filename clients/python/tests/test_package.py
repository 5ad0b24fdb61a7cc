"""The package builds as a wheel with pip, and the installed wheel works."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import HERE


def test_wheel_builds_installs_and_checks(tmp_path, floodgate, key):
    # Built from a copy, so that setuptools' build/ and egg-info stay out of
    # the source tree.
    src = tmp_path / "src"
    shutil.copytree(HERE.parent, src, ignore=shutil.ignore_patterns(
        "tests", "build", "*.egg-info", "__pycache__"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", str(src), "-w", str(wheels)], check=True, timeout=120)
    [wheel] = wheels.glob("floodgate_client-*-py3-none-any.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    "--root-user-action=ignore",
                    "--target", str(target), str(wheel)], check=True, timeout=120)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import floodgate_client; "
            "assert floodgate_client.__file__.startswith(sys.argv[1]), floodgate_client.__file__; "
            "d = floodgate_client.check('five', sys.argv[2], cost=4); "
            "print(d.allowed, d.remaining, d.rate_limit)")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(target), key],
                         env={"FLOODGATE_URL": floodgate.url},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'True 1 "five";r=1;t=60'
