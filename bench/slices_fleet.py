#!/usr/bin/env python3
"""Quota slices against per-decision Redis calls and the embedded store:
three floodgate servers deciding one hot subject, each loaded by its own
redis-benchmark (FG.CHECK fleet hot, pipelined), in three cells run side by
side in every round:

  memory    each server on its own embedded store (the speed slices aim at)
  slices    the three on one redis-server, the rule with slices: { max_share: 5% }
  redis     the three on one redis-server, one script call per decision

The limit is 10^12 a minute: every decision is an admission, so the cells
compare the path of an admitted decision. Prints, per cell, the fleet's
decisions/s (the three benchmarks' sum; median of the rounds), the ratio to
`memory`, floodgate's CPU per decision (every thread of the three servers,
from /proc), and Redis script calls per decision (INFO commandstats), as a
markdown table.

CPU placement (bench/lib.sh, "CPU placement"): the floodgate servers on
--server-cpus, redis-server and the benchmarks on --client-cpus.

usage: bench/slices_fleet.py [--requests N] [--rounds R] [--pipeline P]
                             [--server-cpus LIST] [--client-cpus LIST]
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("FLOODGATE_BIN", ROOT / "build/release/floodgate"))
RULE = "fleet: { algorithm: fixed_window, limits: [1000000000000/minute]%s }"

procs: list[subprocess.Popen] = []


def tool(name: str) -> str:
    path = shutil.which(name) or f"/usr/bin/{name}"
    if not os.access(path, os.X_OK):
        sys.exit(f"{name} is missing (scripts/setup.sh installs it)")
    return path


def pin(cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus] if cpus else []


def spawn(cmd: list[str], **kw) -> subprocess.Popen:
    p = subprocess.Popen(cmd, **kw)
    procs.append(p)
    return p


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    if p in procs:
        procs.remove(p)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port} after {timeout} s")


def redis_cmd(port: int, *args: str) -> str:
    out = subprocess.run([tool("redis-cli"), "-p", str(port), *args], capture_output=True,
                         text=True, timeout=10)
    return out.stdout


def script_calls(port: int) -> int:
    text = redis_cmd(port, "INFO", "commandstats")
    return sum(int(m) for m in re.findall(r"cmdstat_eval(?:sha)?:calls=(\d+)", text))


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, every thread


def run_cell(cell: str, args, tmp: Path, redis_port: int) -> dict:
    slices = ", slices: { max_share: 5% }" if cell == "slices" else ""
    config = tmp / f"{cell}.yaml"
    config.write_text("rules:\n  " + RULE % slices + "\n")
    store = ["--store", f"redis://127.0.0.1:{redis_port}"] if cell != "memory" else []
    servers = []
    for _ in range(3):
        port = free_port()
        p = spawn([*pin(args.server_cpus), str(BIN), "serve", "--config", str(config),
                   "--resp", f"127.0.0.1:{port}", "--http", "127.0.0.1:0", "--threads", "1",
                   *store], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        servers.append((p, port))
    for _, port in servers:
        wait_port(port)
    if cell != "memory":
        redis_cmd(redis_port, "FLUSHALL")
        redis_cmd(redis_port, "CONFIG", "RESETSTAT")
    ticks_before = [cpu_ticks(p.pid) for p, _ in servers]
    benches = [spawn([*pin(args.client_cpus), tool("redis-benchmark"), "-p", str(port), "-n",
                      str(args.requests), "-c", "8", "-P", str(args.pipeline), "--csv",
                      "FG.CHECK", "fleet", "hot"], stdout=subprocess.PIPE, text=True)
               for _, port in servers]
    rps = 0.0
    for b in benches:
        out, _ = b.communicate(timeout=600)
        procs.remove(b)
        m = re.search(r'^"[^"]*","([\d.]+)"', out, re.M)
        if not m:
            sys.exit(f"redis-benchmark printed no figure:\n{out}")
        rps += float(m.group(1))
    ticks = sum(cpu_ticks(p.pid) - t for (p, _), t in zip(servers, ticks_before))
    decisions = 3 * args.requests
    calls = script_calls(redis_port) if cell != "memory" else 0
    for p, _ in servers:
        stop(p)
    hz = os.sysconf("SC_CLK_TCK")
    return {"rps": rps, "cpu_us": ticks / hz * 1e6 / decisions, "calls": calls / decisions}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000, help="per server (default 10^6)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--server-cpus")
    ap.add_argument("--client-cpus")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="floodgate-slices-bench-"))
    try:
        redis_port = free_port()
        spawn([*pin(args.client_cpus), tool("redis-server"), "--port", str(redis_port), "--bind",
               "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp)],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(redis_port)
        cells = ("memory", "slices", "redis")
        results = {c: [] for c in cells}
        for r in range(args.rounds):
            for c in cells:
                results[c].append(run_cell(c, args, tmp, redis_port))
                print(f"round {r + 1} {c}: {results[c][-1]['rps']:.0f}/s", file=sys.stderr)
        base = statistics.median(x["rps"] for x in results["memory"])
        print(f"| cell | fleet decisions/s (median of {args.rounds}) | vs memory | "
              "floodgate CPU per decision | script calls per decision | runs |")
        print("|---|---|---|---|---|---|")
        for c in cells:
            rps = statistics.median(x["rps"] for x in results[c])
            cpu = statistics.median(x["cpu_us"] for x in results[c])
            calls = statistics.median(x["calls"] for x in results[c])
            runs = " ".join(f"{x['rps']:.0f}" for x in results[c])
            print(f"| {c} | {rps:.0f} | {rps / base:.2f} | {cpu:.2f} µs | {calls:.6f} | {runs} |")
    finally:
        for p in list(procs):
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
