"""A stand-in SMS / e-mail gateway for the OTP delivery tests: an HTTP
server on a free loopback port that records every POST and answers with a
fixed status, or (--silent) reads the request and never answers.

    python3 http_receiver.py [--status N] [--silent]

Prints "listening <port>" once ready, then one JSON line per request:
{"path": ..., "headers": {...}, "body": ...}. Stops on SIGTERM.
"""

import argparse
import http.server
import json
import sys
import threading
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--status", type=int, default=200)
    parser.add_argument("--silent", action="store_true")
    args = parser.parse_args()
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length).decode("utf-8", "replace")
            with lock:
                print(json.dumps({"path": self.path, "headers": dict(self.headers.items()),
                                  "body": body}), flush=True)
            if args.silent:
                time.sleep(3600)
                return
            self.send_response(args.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):  # keep stdout for the records
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
