"""Every number the admin API and the RESP admin commands take has a stated
range, checked before anything is written: a value past it is a 400 / -ERR
naming the field and the range, and changes nothing; a value inside it is
answered with success only when the change really took effect. The
extremes are sent to every admin route and command that takes a number
(docs/control-plane.md, "Errors")."""
import json

import pytest

from conftest import RespConn, RespError
from test_control_plane import http

RULES = """
rules:
  api: { algorithm: fixed_window, limits: [5/hour] }
"""

MAX_TTL_MS = 366 * 86_400_000  # ControlPlane::kMaxTtlMs
MAX_COUNT = 10**15  # kMaxLimitCount
EXTREMES = [0, -1, 2**31, 2**53, 2**63 - 1, 2**64, 1e308, "1e3", "abc", True, 1.5]


def in_range(v, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def resp_text(v) -> str:
    """How a RESP client would send the value: its text."""
    return "true" if v is True else str(v)


@pytest.fixture
def server(start_server):
    return start_server(RULES)


def blocked(server, key: str) -> bool:
    status, body, _ = http(server.http_port, "GET", f"/v1/check?rule=api&key={key}")
    return status == 429 and body.get("blocked") is True


def listed_blocks(server) -> set[str]:
    status, body, _ = http(server.http_port, "GET", "/v1/admin/blocks")
    assert status == 200
    return {b["key"] for b in body["blocks"]}


def test_a_block_past_its_range_is_refused_and_one_inside_it_blocks(server):
    for i, v in enumerate(EXTREMES):
        key = f"bk:{i}"
        status, body, _ = http(server.http_port, "PUT", f"/v1/admin/blocks/{key}",
                               {"ttl_ms": v, "reason": "test"})
        if in_range(v, 1, MAX_TTL_MS):
            assert status == 200, (v, body)
            assert key in listed_blocks(server), v
            assert blocked(server, key), v
        else:
            assert status == 400, (v, body)
            assert "ttl_ms" in body["detail"] and str(MAX_TTL_MS) in body["detail"], (v, body)
            assert key not in listed_blocks(server), v
            assert not blocked(server, key), v


def test_an_override_past_its_range_is_refused_and_one_inside_it_applies(server):
    for i, v in enumerate(EXTREMES):
        key = f"ov:{i}"
        status, body, _ = http(server.http_port, "PUT", f"/v1/admin/overrides/api/{key}",
                               {"limits": ["1/hour"], "ttl_ms": v})
        got, record, _ = http(server.http_port, "GET", f"/v1/admin/overrides/api/{key}")
        if in_range(v, 0, MAX_TTL_MS):
            assert status == 200, (v, body)
            assert got == 200 and record["limits"] == ["1/hour"], (v, record)
            first, _, _ = http(server.http_port, "GET", f"/v1/check?rule=api&key={key}")
            second, _, _ = http(server.http_port, "GET", f"/v1/check?rule=api&key={key}")
            assert (first, second) == (200, 429), v  # the override's 1/hour, not the rule's 5
        else:
            assert status == 400, (v, body)
            assert "ttl_ms" in body["detail"] and str(MAX_TTL_MS) in body["detail"], (v, body)
            assert got == 404, v


def test_override_limits_past_their_range_are_refused(server):
    for v in [0, -1, 2**53, 2**63 - 1, 2**64, "1e3", "abc"]:
        status, body, _ = http(server.http_port, "PUT", "/v1/admin/overrides/api/lim",
                               {"limits": [f"{v}/hour"]})
        assert status == 400, (v, body)
        assert body["detail"].startswith("limits[0]: "), (v, body)
    assert http(server.http_port, "GET", "/v1/admin/overrides/api/lim")[0] == 404


def test_a_refund_past_its_range_is_refused(server):
    for v in EXTREMES:
        status, body, _ = http(server.http_port, "POST", "/v1/admin/subjects/api/rf/refund",
                               {"cost": v})
        if in_range(v, 1, MAX_COUNT):
            assert status == 200, (v, body)
        else:
            assert status == 400, (v, body)
            assert "cost" in body["detail"] and str(MAX_COUNT) in body["detail"], (v, body)


@pytest.mark.parametrize("path", ["/v1/admin/log?limit=", "/v1/admin/top?rule=api&limit="])
def test_query_counts_past_their_range_are_refused(server, path):
    for v in EXTREMES + [5, 1000, 1001]:
        status, body, _ = http(server.http_port, "GET", path + resp_text(v))
        if in_range(v, 1, 1000):
            assert status == 200, (v, body)
        else:
            assert status == 400, (v, body)
            assert "limit" in body["detail"] and "1000" in body["detail"], (v, body)


def test_a_runtime_rule_with_numbers_past_their_range_is_refused(server):
    for v in [0, -1, 2**53, 2**63 - 1, 2**64, 1e308]:
        rule = {"algorithm": "fixed_window", "limits": [f"{v}/hour"]}
        status, body, _ = http(server.http_port, "PUT", "/v1/admin/rules/rt", rule)
        assert status == 400, (v, body)
    for v in ["0s", "100000d", 2**31, -1]:
        rule = {"algorithm": "fixed_window", "limits": ["1/hour"], "block_for": v}
        status, body, _ = http(server.http_port, "PUT", "/v1/admin/rules/rt", rule)
        assert status == 400, (v, body)
        assert "block_for" in body["detail"], (v, body)
        assert "block_for.block_for" not in body["detail"], body
    status, _, _ = http(server.http_port, "GET", "/v1/check?rule=rt&key=k")
    assert status == 404


def test_resp_admin_commands_take_the_same_ranges(server):
    with RespConn(server.resp_port) as c:
        for i, v in enumerate(EXTREMES):
            key = f"rb:{i}"
            reply = c.command("FG.BLOCK", key, resp_text(v))
            if in_range(v, 1, MAX_TTL_MS):
                assert reply == "OK", (v, reply)
                assert key in listed_blocks(server) and blocked(server, key), v
            else:
                assert isinstance(reply, RespError), (v, reply)
                assert "ttl_ms" in str(reply) and str(MAX_TTL_MS) in str(reply), (v, reply)
                assert key not in listed_blocks(server) and not blocked(server, key), v

            key = f"ro:{i}"
            reply = c.command("FG.OVERRIDE", "SET", "api", key, resp_text(v), "1/hour")
            got = c.command("FG.OVERRIDE", "GET", "api", key)
            if in_range(v, 0, MAX_TTL_MS):
                assert reply == "OK", (v, reply)
                assert got is not None and got[0] == [b"1/hour"], (v, got)
            else:
                assert isinstance(reply, RespError), (v, reply)
                assert "ttl_ms" in str(reply) and str(MAX_TTL_MS) in str(reply), (v, reply)
                assert got is None, (v, got)

            reply = c.command("FG.REFUND", "api", "rr", resp_text(v))
            if in_range(v, 1, MAX_COUNT):
                assert not isinstance(reply, RespError), (v, reply)
            else:
                assert isinstance(reply, RespError), (v, reply)
                assert "cost" in str(reply) and str(MAX_COUNT) in str(reply), (v, reply)


def test_nothing_refused_reached_the_change_log(server):
    http(server.http_port, "PUT", "/v1/admin/blocks/x", {"ttl_ms": 2**63 - 1})
    http(server.http_port, "PUT", "/v1/admin/overrides/api/x", {"limits": ["1/h"], "ttl_ms": -1})
    with RespConn(server.resp_port) as c:
        assert isinstance(c.command("FG.BLOCK", "x", "9223372036854775807"), RespError)
    status, body, _ = http(server.http_port, "GET", "/v1/admin/log")
    assert status == 200 and body["entries"] == [], json.dumps(body)
