#!/usr/bin/env python3
"""Hostile and careless clients against `floodgate serve`, measured.

Runs each flood of issue "Edge protection" against one floodgate binary
(embedded store, its default settings, 2 event loops, 127.0.0.1 only) and
prints one markdown table row per figure. Every flood is bounded in
connections and seconds and stops by itself; every process it starts is
killed at the end.

    bench/hostile.py --floodgate build/release/floodgate [--label NAME] [--quick]

Scenarios:
  non-reader    one RESP (then one HTTP) client pipelining FG.CHECK as fast
                as the server reads and never reading a reply, for 8 s,
                while a well-behaved client checks every 5 ms: the server's
                memory growth (peak RSS - RSS before), the other client's
                p99 and worst latency, whether the non-reader was closed.
  sigterm       SIGTERM with a non-reader attached: seconds until exit.
  slowloris     200 HTTP + 200 RESP connections sending one byte every 2 s:
                how many are still open after 15 s.
  idle flood    20,000 idle connections (max_connections 10,000): a new RESP
                client's PING and GET /healthz, each timed (or failed).
  fd limit      a server under `prlimit --nofile=1024`, 1,200 clients with a
                command half sent: the server's CPU over 3 s, and whether it
                logged the accept errors.
  idle          no client at all: the server's CPU over 3 s.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

CONFIG = """\
rules:
  api: { algorithm: gcra, limits: [1000000/s] }
"""


def log(msg: str) -> None:
    print(f"hostile: {msg}", file=sys.stderr, flush=True)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def encode(*args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


class Server:
    def __init__(self, binary: str, workdir: str, prefix: list[str] | None = None,
                 extra_config: str = ""):
        self.config = os.path.join(workdir, f"floodgate-{time.monotonic_ns()}.yaml")
        with open(self.config, "w") as f:
            f.write(CONFIG + extra_config)
        self.log_path = os.path.join(workdir, f"floodgate-{time.monotonic_ns()}.log")
        self.log_file = open(self.log_path, "wb")
        cmd = [*(prefix or []), binary, "serve", "--config", self.config, "--resp",
               "127.0.0.1:0", "--http", "127.0.0.1:0", "--threads", "2"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log_file)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            text = self.log_text()
            m = re.search(r"msg=listening resp=127\.0\.0\.1:(\d+) http=127\.0\.0\.1:(\d+)", text)
            if m:
                self.resp_port, self.http_port = int(m.group(1)), int(m.group(2))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise SystemExit(f"floodgate did not start: {self.log_text()[-2000:]}")

    def log_text(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log_file.close()


def check_once(port: int, timeout: float = 2.0) -> float | None:
    """Seconds for a new connection's PING, or None when it failed."""
    t = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(100)
                if not chunk:
                    return None
                data += chunk
            return time.monotonic() - t if data.startswith(b"+PONG") else None
    except OSError:
        return None


def healthz_once(port: int, timeout: float = 2.0) -> tuple[float | None, int]:
    t = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
    except OSError:
        return None, 0
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return time.monotonic() - t, status


def non_reader(server: Server, protocol: str, seconds: float) -> dict:
    request = encode("FG.CHECK", "api", "k") if protocol == "resp" else (
        b"GET /v1/check?rule=api&key=k HTTP/1.1\r\nHost: t\r\n\r\n")
    port = server.resp_port if protocol == "resp" else server.http_port
    base = rss_mb(server.proc.pid)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.settimeout(0.2)  # blocking sends, as fast as the server takes them
    payload = request * ((1 << 20) // len(request))
    stop = threading.Event()
    state = {"peak": base, "closed": False, "sent": 0}

    def flood():
        end = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < end:
            try:
                state["sent"] += sock.send(payload)
            except socket.timeout:
                pass
            except OSError:
                state["closed"] = True
                return

    def sample():
        while not stop.is_set():
            try:
                state["peak"] = max(state["peak"], rss_mb(server.proc.pid))
            except OSError:
                return
            time.sleep(0.05)

    threads = [threading.Thread(target=flood, daemon=True),
               threading.Thread(target=sample, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    latencies = []
    failures = 0
    try:
        with socket.create_connection(("127.0.0.1", server.resp_port), timeout=3) as good:
            end = time.monotonic() + seconds - 1.0
            msg = encode("FG.CHECK", "api", "good")
            while time.monotonic() < end:
                t = time.monotonic()
                try:
                    good.sendall(msg)
                    data = b""
                    while data.count(b"\r\n") < 6:
                        chunk = good.recv(4096)
                        if not chunk:
                            raise OSError("closed")
                        data += chunk
                    latencies.append(time.monotonic() - t)
                except OSError:
                    failures += 1
                    break
                time.sleep(0.005)
    except OSError:
        failures += 1
    threads[0].join(seconds + 5)
    # Did the server close the non-reader (reads see EOF or a reset)?
    closed = state["closed"]
    if not closed:
        try:
            sock.setblocking(True)
            sock.settimeout(0.2)
            while sock.recv(1 << 20):
                pass
            closed = True
        except socket.timeout:
            pass
        except OSError:
            closed = True
    stop.set()
    threads[1].join(2)
    sock.close()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else float("nan")
    worst = latencies[-1] * 1000 if latencies else float("nan")
    return {"grown_mb": state["peak"] - base, "p99_ms": p99, "max_ms": worst,
            "checks": len(latencies), "failures": failures, "closed": closed,
            "sent_mb": state["sent"] / 2**20}


def sigterm_with_non_reader(binary: str, workdir: str) -> float:
    """Seconds from SIGTERM to exit while a client pipelines and never reads
    (it goes on sending throughout)."""
    server = Server(binary, workdir)
    sock = socket.create_connection(("127.0.0.1", server.resp_port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.settimeout(0.2)
    payload = encode("FG.CHECK", "api", "k") * 30000
    stop = threading.Event()

    def flood():
        while not stop.is_set():
            try:
                sock.send(payload)
            except socket.timeout:
                pass
            except OSError:
                return

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    time.sleep(2.0)
    t = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(15)
        took = time.monotonic() - t
    except subprocess.TimeoutExpired:
        took = float("inf")
    stop.set()
    thread.join(5)
    sock.close()
    server.kill()
    return took


def slowloris(server: Server, per_protocol: int, seconds: float) -> int:
    data = {server.http_port: b"GET /v1/check?rule=api&key=slow HTTP/1.1\r\nHost: t\r\n\r\n",
            server.resp_port: encode("FG.CHECK", "api", "slow")}
    socks = []
    for _ in range(per_protocol):
        for port in data:
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            socks.append((s, data[port]))
    alive = {id(s): True for s, _ in socks}
    start = time.monotonic()
    step = 0
    next_byte = start
    while time.monotonic() - start < seconds:
        send_now = time.monotonic() >= next_byte
        for s, d in socks:
            if not alive[id(s)]:
                continue
            try:
                while s.recv(4096):
                    pass
                alive[id(s)] = False
                continue
            except BlockingIOError:
                pass
            except OSError:
                alive[id(s)] = False
                continue
            if send_now and step < len(d) - 1:
                try:
                    s.send(d[step:step + 1])
                except OSError:
                    alive[id(s)] = False
        if send_now:
            step += 1
            next_byte += 2.0
        time.sleep(0.1)
    for s, _ in socks:
        s.close()
    return sum(alive.values())


def idle_flood(server: Server, count: int) -> dict:
    flood = []
    refused = 0
    for i in range(count):
        port = server.resp_port if i % 2 else server.http_port
        try:
            flood.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            refused += 1
    time.sleep(0.5)
    pings, healths = [], []
    for _ in range(5):
        pings.append(check_once(server.resp_port))
        healths.append(healthz_once(server.http_port))
        time.sleep(0.1)
    for s in flood:
        s.close()
    ok_pings = [p for p in pings if p is not None]
    ok_health = [h for h, status in healths if h is not None and status == 200]
    return {"ping_ok": len(ok_pings), "ping_max_ms": max(ok_pings) * 1000 if ok_pings else None,
            "health_ok": len(ok_health),
            "health_max_ms": max(ok_health) * 1000 if ok_health else None,
            "statuses": sorted({status for _, status in healths})}


def fd_limit(binary: str, workdir: str, clients: int) -> dict:
    server = Server(binary, workdir, prefix=["prlimit", "--nofile=1024:1024", "--"])
    busy = []
    for _ in range(clients):
        try:
            s = socket.create_connection(("127.0.0.1", server.resp_port), timeout=1)
            s.sendall(b"*1\r\n$4\r\nPI")
            busy.append(s)
        except OSError:
            pass
    time.sleep(0.5)
    before = cpu_s(server.proc.pid)
    time.sleep(3.0)
    used = cpu_s(server.proc.pid) - before
    logged = "accept failed" in server.log_text()
    for s in busy:
        s.close()
    server.kill()
    return {"cpu_pct": used / 3.0 * 100, "logged": logged}


def idle_cpu(binary: str, workdir: str) -> float:
    server = Server(binary, workdir)
    time.sleep(0.5)
    before = cpu_s(server.proc.pid)
    time.sleep(3.0)
    used = cpu_s(server.proc.pid) - before
    server.kill()
    return used / 3.0 * 100


def fmt(v, spec=".1f") -> str:
    if v is None:
        return "failed"
    if isinstance(v, float) and v != v:
        return "n/a"
    return format(v, spec)


def run(binary: str, label: str, quick: bool) -> list[tuple[str, str, str]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="floodgate-hostile-") as workdir:
        for protocol in ("resp", "http"):
            log(f"{label}: non-reader ({protocol})")
            server = Server(binary, workdir)
            r = non_reader(server, protocol, 3.0 if quick else 8.0)
            server.kill()
            rows.append((f"non-reader ({protocol})", "server memory growth",
                         f"{fmt(r['grown_mb'])} MB"))
            rows.append((f"non-reader ({protocol})", "other client p99 / max",
                         f"{fmt(r['p99_ms'], '.2f')} / {fmt(r['max_ms'], '.1f')} ms"
                         + (f", {r['failures']} failed" if r["failures"] else "")))
            rows.append((f"non-reader ({protocol})", "bytes it sent / closed by the server",
                         f"{fmt(r['sent_mb'])} MB / {'yes' if r['closed'] else 'no'}"))
        log(f"{label}: SIGTERM with a non-reader")
        took = sigterm_with_non_reader(binary, workdir)
        rows.append(("SIGTERM, non-reader attached", "time to exit",
                     "did not exit in 15 s" if took == float("inf") else f"{took:.2f} s"))
        per, secs = (50, 12.0) if quick else (200, 15.0)
        log(f"{label}: slowloris ({per}+{per} connections, {secs:.0f} s)")
        server = Server(binary, workdir)
        still = slowloris(server, per, secs)
        server.kill()
        rows.append((f"slowloris ({per} HTTP + {per} RESP, 1 byte / 2 s)",
                     f"still open after {secs:.0f} s", f"{still} of {2 * per}"))
        # The quick run keeps descriptors low: max_connections 1,000. The
        # flood leaves this process descriptors for its own checks.
        count, max_conn = (3000, 1000) if quick else (20000, 10000)
        count = min(count, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 200)
        log(f"{label}: idle flood ({count} connections, max_connections {max_conn})")
        server = Server(binary, workdir,
                        extra_config=f"server: {{ max_connections: {max_conn} }}\n")
        r = idle_flood(server, count)
        server.kill()
        scenario = f"idle flood ({count}, max_connections {max_conn})"
        rows.append((scenario, "new RESP client PING",
                     f"{r['ping_ok']}/5 ok, max {fmt(r['ping_max_ms'])} ms"))
        rows.append((scenario, "GET /healthz",
                     f"{r['health_ok']}/5 ok (status {r['statuses']}), "
                     f"max {fmt(r['health_max_ms'])} ms"))
        clients = 1200
        log(f"{label}: fd limit (prlimit 1024, {clients} busy clients)")
        r = fd_limit(binary, workdir, clients)
        rows.append(("past the fd limit (nofile 1024, 1200 clients)", "server CPU / logged",
                     f"{r['cpu_pct']:.0f} % / {'yes' if r['logged'] else 'no'}"))
        log(f"{label}: idle")
        rows.append(("idle server", "CPU over 3 s", f"{idle_cpu(binary, workdir):.1f} %"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--floodgate", action="append", required=True,
                    help="a binary to measure (repeat to compare, one column each)")
    ap.add_argument("--label", action="append", default=[], help="column title per binary")
    ap.add_argument("--quick", action="store_true", help="smaller, shorter floods (CI)")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:  # root may raise the hard limit; others keep theirs
        resource.setrlimit(resource.RLIMIT_NOFILE, (65536, max(hard, 65536)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    labels = args.label + args.floodgate[len(args.label):]
    columns = [run(os.path.abspath(b), l, args.quick) for b, l in zip(args.floodgate, labels)]
    print("| scenario | figure | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for i, (scenario, figure, _) in enumerate(columns[0]):
        print(f"| {scenario} | {figure} | " + " | ".join(c[i][2] for c in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
