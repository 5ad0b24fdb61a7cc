"""Why docs/redis.md says `auto_eject_hosts: false` for Twemproxy: with
true, nutcracker re-hashes a dead backend's keys onto the other one, where a
subject's counter starts again from zero, so floodgate admits more than the
limit; with false, the dead backend's subjects get the rule's
on_backend_error and the limit holds."""

from __future__ import annotations

import time

import pytest

from conftest import RespConn, http_get, metric_value, start_nutcracker

LIMIT = 3


@pytest.mark.parametrize("eject", [False, True], ids=["auto_eject_false", "auto_eject_true"])
def test_a_dead_backend_with_and_without_auto_eject(start_server, redis_server, tmp_dir, eject):
    backends = [redis_server(), redis_server()]
    # Ejected after one failure, and kept out for the whole test. The dead
    # backend refuses at once; the timeouts are long enough that a slow
    # machine never ejects the live one.
    proxy, port = start_nutcracker(
        tmp_dir, backends, timeout_ms=3000, eject=eject,
        extra="  server_failure_limit: 1\n  server_retry_timeout: 60000\n")
    try:
        server = start_server(
            f"store: redis+proxy://127.0.0.1:{port}\n"
            "redis: { timeout_ms: 5000 }\n"
            f"rules:\n  quota: {{ limits: {LIMIT}/day, on_backend_error: deny }}\n",
            threads=1)
        with RespConn(server.resp_port) as c:
            # A subject whose key lives on backend 0, with 2 of its 3 spent.
            subject = None
            for i in range(200):
                s = f"user:{i}"
                if backends[0].client().exists(f"fg:{{quota:{s}}}"):
                    continue  # (not yet: nothing spent on it)
                assert c.command("FG.CHECK", "quota", s)[0] == 1
                if backends[0].client().exists(f"fg:{{quota:{s}}}"):
                    subject = s
                    break
            assert subject is not None, "no subject hashed to backend 0"
            assert c.command("FG.CHECK", "quota", subject)[0] == 1
            backends[0].stop()
            admitted = 0
            for _ in range(20):
                reply = c.command("FG.CHECK", "quota", subject)
                admitted += reply[0] == 1
                time.sleep(0.02)
        fallbacks = metric_value(http_get(server.http_port, "/metrics").body.decode(),
                                 "floodgate_fallback_decisions_total",
                                 {"reason": "backend_error"}) or 0
        if eject:
            # Re-hashed onto backend 1, the counter starts from zero: 3 more
            # admissions, 5 in the day against a limit of 3.
            assert admitted == LIMIT
            assert backends[1].client().exists(f"fg:{{quota:{subject}}}")
        else:
            # The limit holds: every answer is on_backend_error's deny.
            assert admitted == 0
            assert fallbacks == 20
    finally:
        proxy.kill()
        proxy.wait(5)
