"""A stand-in SMS / e-mail gateway or webhook for the delivery tests: an
HTTP server on a loopback port (a free one, or --port: a receiver that went
down comes back where it was) that records every POST and answers with a
fixed status, or (--silent) reads the request and never answers.

    python3 http_receiver.py [--status N] [--silent] [--port P]

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
    parser.add_argument("--port", type=int, default=0)
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

    http.server.ThreadingHTTPServer.allow_reuse_address = True
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
