"""Blocks of networks (docs/control-plane.md, "Blocks of networks"): a
network blocked on one server denies addresses inside it on another sharing
one real Redis, over HTTP /v1/check and RESP FG.CHECK (redis-py), and not
those outside; DELETE lifts it; bad input answers 400 and changes nothing;
the embedded store keeps a network block across a restart with data_dir."""
import time

from conftest import until
from test_control_plane import RULES, check, http, two_servers

BLOCKS = "/v1/admin/blocks"


def blocks(port: int) -> list[dict]:
    status, body, _ = http(port, "GET", BLOCKS)
    assert status == 200, body
    return body["blocks"]


def without_time(listed: list[dict]) -> list[dict]:
    """The blocks as listed, the time left (which runs) left out."""
    return [{k: v for k, v in b.items() if k != "expires_in_ms"} for b in listed]


def fg_check(client, rule: str, key: str) -> list[int]:
    """FG.CHECK's five integers: allowed, limit, remaining, retry, reset."""
    return client.execute_command("FG.CHECK", rule, key)


def fresh(prefix: str):
    """A new address under `prefix` at each call: a subject checked for the
    first time, which only a block can deny (polling one address would
    spend its quota and be denied by the limit)."""
    n = [0]

    def next_address() -> str:
        n[0] += 1
        assert n[0] < 255, "out of fresh addresses"
        return f"{prefix}{n[0]}"
    return next_address


def test_a_network_blocked_on_one_server_denies_on_the_other(start_server, redis_server):
    import redis  # python3-redis
    a, b, _ = two_servers(start_server, redis_server().url)
    resp_b = redis.Redis(host="127.0.0.1", port=b.resp_port, socket_timeout=10)
    try:
        # Before: both addresses are admitted on B (g: 10/s, plenty).
        assert check(b.http_port, "g", "203.0.113.77")[0] == 200
        assert fg_check(resp_b, "g", "203.0.114.1")[0] == 1

        status, body, _ = http(a.http_port, "PUT", f"{BLOCKS}/cidr/203.0.113.0/24",
                               {"ttl_ms": 60000, "reason": "botnet"})
        assert status == 200, body
        assert body["cidr"] == "203.0.113.0/24" and body["rule"] is None, body
        assert body["reason"] == "botnet" and 59000 < body["expires_in_ms"] <= 60000, body

        # B denies an address inside within 2 s, over RESP and HTTP alike.
        start = time.monotonic()
        inside = fresh("203.0.113.")
        until(lambda: fg_check(resp_b, "api", inside())[0] == 0, 2.0,
              "the network block on B over RESP", every_s=0.02)
        assert time.monotonic() - start < 2.0
        allowed, limit, remaining, retry, reset = fg_check(resp_b, "api", "203.0.113.77")
        assert (allowed, limit, remaining) == (0, 3, 0)
        assert 55000 <= retry <= 60000 and reset == retry, (retry, reset)
        status, body = check(b.http_port, "login", "203.0.113.77")
        assert status == 429, body
        assert body["blocked"] is True and body["reason"] == "botnet", body
        assert body["remaining"] == 0 and 55000 <= body["retry_after_ms"] <= 60000, body
        # The IPv4-mapped form is the same address.
        assert check(b.http_port, "g", "::ffff:203.0.113.9")[1]["blocked"] is True
        # Outside it: admitted, and counted as ever.
        assert fg_check(resp_b, "g", "203.0.114.1")[0] == 1
        status, body = check(b.http_port, "api", "203.0.114.1")
        assert status == 200 and body.get("blocked") is not True, body
        assert check(b.http_port, "api", "user:1")[0] == 200

        # Listed on both servers, the network where a key shows.
        for port in (a.http_port, b.http_port):
            assert [x["cidr"] for x in blocks(port)] == ["203.0.113.0/24"]
        status, body, _ = http(b.http_port, "GET", f"{BLOCKS}/cidr/203.0.113.0/24")
        assert status == 200 and len(body["blocks"]) == 1, body
        assert body["cidr"] == "203.0.113.0/24" and body["blocks"][0]["reason"] == "botnet"
        # A key of the network's text is another subject: no blocks of its own.
        status, body, _ = http(b.http_port, "GET", f"{BLOCKS}/203.0.113.0%2F24")
        assert status == 200 and body["blocks"] == [], body

        # An IPv6 network on one rule, made on B, in force on A.
        status, body, _ = http(b.http_port, "PUT", f"{BLOCKS}/cidr/2001:db8::/32",
                               {"ttl_ms": 60000, "rule": "api"})
        assert status == 200 and body["cidr"] == "2001:db8::/32", body
        inside_v6 = fresh("2001:db8:5::")
        until(lambda: check(a.http_port, "api", inside_v6())[1].get("blocked") is True, 2.0,
              "the IPv6 block on A", every_s=0.02)
        assert check(a.http_port, "g", "2001:db8:5::1")[0] == 200  # that rule only
        assert check(a.http_port, "api", "2001:db9::1")[0] == 200

        # DELETE on A lifts the IPv4 one on B.
        status, body, _ = http(a.http_port, "DELETE", f"{BLOCKS}/cidr/203.0.113.0/24")
        assert status == 200, body
        assert body["cidr"] == "203.0.113.0/24" and len(body["blocks"]) == 1, body
        until(lambda: fg_check(resp_b, "api", inside())[0] == 1, 2.0, "the lift on B",
              every_s=0.02)
        assert check(b.http_port, "g", "203.0.113.78")[0] == 200
        assert [x["cidr"] for x in blocks(b.http_port)] == ["2001:db8::/32"]
        status, body, _ = http(a.http_port, "DELETE", f"{BLOCKS}/cidr/203.0.113.0/24")
        assert status == 404, body

        # The change log names the network.
        status, body, _ = http(b.http_port, "GET", "/v1/admin/log?limit=3")
        targets = [(e["action"], e["target"]) for e in body["entries"]]
        assert targets == [("block.delete", "cidr:203.0.113.0/24"),
                           ("block.set", "api/cidr:2001:db8::/32"),
                           ("block.set", "cidr:203.0.113.0/24")], targets
    finally:
        resp_b.close()


def test_bad_networks_are_refused_and_change_nothing(start_server):
    server = start_server(RULES)
    port = server.http_port
    assert http(port, "PUT", f"{BLOCKS}/cidr/192.0.2.0/24", {"ttl_ms": 60000})[0] == 200
    listed = blocks(port)
    assert len(listed) == 1

    refusals = [
        ("203.0.113.7/24", {"ttl_ms": 60000},
         "network: '203.0.113.7/24' has host bits set; the network is 203.0.113.0/24"),
        ("2001:db8::1/32", {"ttl_ms": 60000},
         "network: '2001:db8::1/32' has host bits set; the network is 2001:db8::/32"),
        ("203.0.113.0/33", {"ttl_ms": 60000},
         "network: '203.0.113.0/33': prefix length 33 is past 32 for IPv4"),
        ("2001:db8::/129", {"ttl_ms": 60000},
         "network: '2001:db8::/129': prefix length 129 is past 128 for IPv6"),
        ("not-an-ip/8", {"ttl_ms": 60000},
         "network: 'not-an-ip/8': 'not-an-ip' is not an IPv4 address"),
        ("203.0.113.0/x", {"ttl_ms": 60000},
         "network: '203.0.113.0/x': prefix length 'x' is not a decimal number"),
        ("203.0.113.0/24", {"reason": "no ttl"}, "ttl_ms: required; a block always expires"),
        ("203.0.113.0/24", {"ttl_ms": 0}, "ttl_ms: must be an integer from 1 to 31622400000"),
        ("203.0.113.0/24", {"ttl_ms": 60000, "cidr": "x"}, "unknown field 'cidr'"),
        # The network is checked before the body.
        ("203.0.113.7/24", {}, "host bits set"),
    ]
    for network, body, detail in refusals:
        status, answer, _ = http(port, "PUT", f"{BLOCKS}/cidr/{network}", body)
        assert status == 400, (network, body, answer)
        assert detail in answer["detail"], (network, body, answer)
    assert http(port, "PUT", f"{BLOCKS}/cidr/203.0.113.0/24", "not json")[0] == 400
    # An unknown rule: 404.
    status, answer, _ = http(port, "PUT", f"{BLOCKS}/cidr/203.0.113.0/24",
                             {"ttl_ms": 60000, "rule": "nope"})
    assert status == 404 and "unknown rule 'nope'" in answer["detail"], answer
    # GET and DELETE read the network alike.
    for method in ("GET", "DELETE"):
        status, answer, _ = http(port, method, f"{BLOCKS}/cidr/192.0.2.7/24")
        assert status == 400 and "the network is 192.0.2.0/24" in answer["detail"], answer
    # A path of the wrong shape under cidr/ is no route.
    status, answer, _ = http(port, "PUT", f"{BLOCKS}/cidr/192.0.2.0", {"ttl_ms": 60000})
    assert status == 404 and "/v1/admin/blocks/cidr/{addr}/{len}" in answer["detail"], answer

    assert without_time(blocks(port)) == without_time(listed)
    status, body = check(port, "api", "203.0.113.7")
    assert status == 200 and body.get("blocked") is not True, body
    # Nothing was logged for the refusals: the one change is the first PUT.
    status, body, _ = http(port, "GET", "/v1/admin/log?limit=100")
    assert [e["target"] for e in body["entries"]] == ["cidr:192.0.2.0/24"], body


def test_the_read_token_cannot_block_a_network(start_server):
    admin, read = "s3cret-admin-token", "r3ad-only-token"
    server = start_server(
        "admin: { token_env: FG_TEST_ADMIN, read_token_env: FG_TEST_READ }\n" + RULES,
        env={"FG_TEST_ADMIN": admin, "FG_TEST_READ": read})
    port = server.http_port
    path = f"{BLOCKS}/cidr/192.0.2.0/24"
    assert http(port, "PUT", path, {"ttl_ms": 60000})[0] == 401
    assert http(port, "PUT", path, {"ttl_ms": 60000}, token=read)[0] == 403
    assert http(port, "GET", path)[0] == 401
    status, body, _ = http(port, "GET", path, token=read)
    assert status == 200 and body["blocks"] == [], body
    assert http(port, "PUT", path, {"ttl_ms": 60000}, token=admin)[0] == 200
    assert http(port, "DELETE", path, token=read)[0] == 403
    assert len(http(port, "GET", BLOCKS, token=read)[1]["blocks"]) == 1
    assert http(port, "DELETE", path, token=admin)[0] == 200
    assert http(port, "GET", BLOCKS, token=read)[1]["blocks"] == []


def test_the_embedded_store_keeps_a_network_block_across_a_restart(start_server, tmp_dir):
    data = tmp_dir / "data"
    data.mkdir()
    config = f"data_dir: {data}\n{RULES}"
    server = start_server(config)
    status, body, _ = http(server.http_port, "PUT", f"{BLOCKS}/cidr/2001:db8:aa::/48",
                           {"ttl_ms": 600000, "rule": "api", "reason": "kept"})
    assert status == 200, body
    assert http(server.http_port, "PUT", f"{BLOCKS}/cidr/198.51.100.0/24",
                {"ttl_ms": 600000})[0] == 200
    assert check(server.http_port, "api", "2001:db8:aa::1")[0] == 429
    assert server.stop() == 0

    again = start_server(config)
    status, body = check(again.http_port, "api", "2001:db8:aa:1::7")
    assert status == 429 and body["blocked"] is True and body["reason"] == "kept", body
    assert check(again.http_port, "g", "2001:db8:aa::1")[0] == 200  # its rule only
    assert check(again.http_port, "g", "198.51.100.200")[0] == 429
    assert check(again.http_port, "g", "198.51.101.1")[0] == 200
    assert sorted(x["cidr"] for x in blocks(again.http_port)) == [
        "198.51.100.0/24", "2001:db8:aa::/48"]
    # Lifted, and still lifted after another restart.
    assert http(again.http_port, "DELETE", f"{BLOCKS}/cidr/198.51.100.0/24")[0] == 200
    assert again.stop() == 0
    third = start_server(config)
    assert check(third.http_port, "g", "198.51.100.200")[0] == 200
    assert [x["cidr"] for x in blocks(third.http_port)] == ["2001:db8:aa::/48"]
