"""The fronts answer alike: deny_status on a POST check (query or body), the
admin token on the data plane of both fronts (the read token on neither),
WRONGPASS for a wrong password whenever any token is set, a key's blocks in
one shape for GET and DELETE, and an unknown rule a 404 on every admin
listing (docs/control-plane.md, README "HTTP")."""
import http.client
import json

from conftest import RespConn, RespError
from test_control_plane import http as request

RULES = """
rules:
  api: { algorithm: fixed_window, limits: [1/hour] }
"""
ADMIN, READ, DATA = "adm1n-token", "r3ad-token", "d4ta-token"


def post_check(port: int, path: str, body, token: str | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, body=json.dumps(body), headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data) if data else None


def test_deny_status_on_a_post_check(start_server):
    port = start_server(RULES).http_port
    assert post_check(port, "/v1/check", {"rule": "api", "key": "a"})[0] == 200
    assert post_check(port, "/v1/check?deny_status=403", {"rule": "api", "key": "a"})[0] == 403
    assert post_check(port, "/v1/check", {"rule": "api", "key": "a", "deny_status": 401})[0] == 401
    assert post_check(port, "/v1/check", {"rule": "api", "key": "a"})[0] == 429
    status, body = post_check(port, "/v1/check", {"rule": "api", "key": "a", "deny_status": 404})
    assert status == 400 and "deny_status" in body["detail"]
    status, body = post_check(port, "/v1/check?rule=other", {"rule": "api", "key": "b"})
    assert status == 400 and "its query may hold only deny_status" in body["detail"]
    # A refused request consumed nothing: b's one unit is still there.
    assert post_check(port, "/v1/check", {"rule": "api", "key": "b"})[0] == 200


def test_the_admin_token_opens_the_data_plane_on_both_fronts(start_server):
    server = start_server("server: { auth_token_env: FG_DATA }\n"
                          "admin: { token_env: FG_ADMIN, read_token_env: FG_READ }\n" + RULES,
                          env={"FG_DATA": DATA, "FG_ADMIN": ADMIN, "FG_READ": READ})
    body = {"rule": "api", "key": "t"}
    assert post_check(server.http_port, "/v1/check", body)[0] == 401
    assert post_check(server.http_port, "/v1/check", body, token=READ)[0] == 401
    assert post_check(server.http_port, "/v1/check", body, token=DATA)[0] == 200
    assert post_check(server.http_port, "/v1/check", body, token=ADMIN)[0] == 429  # counted
    with RespConn(server.resp_port) as c:
        assert c.command("AUTH", ADMIN) == "OK"
        assert c.command("FG.CHECK", "api", "r")[0] == 1
        assert isinstance(c.command("FG.STATE", "api", "r"), list)
    with RespConn(server.resp_port) as c:
        assert c.command("AUTH", READ) == "OK"
        reply = c.command("FG.CHECK", "api", "r")
        assert isinstance(reply, RespError) and str(reply).startswith("NOAUTH"), reply
        assert isinstance(c.command("FG.STATE", "api", "r"), list)  # reads are open to it


def test_a_wrong_password_with_only_an_admin_token_is_wrongpass(start_server):
    server = start_server("admin: { token_env: FG_ADMIN }\n" + RULES, env={"FG_ADMIN": ADMIN})
    with RespConn(server.resp_port) as c:
        reply = c.command("AUTH", "wrong")
        assert isinstance(reply, RespError) and str(reply).startswith("WRONGPASS"), reply
        assert c.command("AUTH", ADMIN) == "OK"
    plain = start_server(RULES)  # no token anywhere: Redis's own words
    with RespConn(plain.resp_port) as c:
        reply = c.command("AUTH", "x")
        assert isinstance(reply, RespError) and "without any password configured" in str(reply)


def test_a_keys_blocks_have_one_shape_and_unknown_rules_are_404(start_server):
    port = start_server(RULES).http_port
    assert request(port, "PUT", "/v1/admin/blocks/k", {"ttl_ms": 60000})[0] == 200
    assert request(port, "PUT", "/v1/admin/blocks/k", {"ttl_ms": 60000, "rule": "api"})[0] == 200
    status, shown, _ = request(port, "GET", "/v1/admin/blocks/k")
    assert status == 200 and shown["key"] == "k" and len(shown["blocks"]) == 2
    status, removed, _ = request(port, "DELETE", "/v1/admin/blocks/k")
    assert status == 200

    def without_time(shape):  # each record as GET shows it, but for the time left
        return {**shape, "blocks": [{k: v for k, v in b.items() if k != "expires_in_ms"}
                                    for b in shape["blocks"]]}
    assert without_time(removed) == without_time(shown), (removed, shown)
    assert request(port, "GET", "/v1/admin/overrides?rule=api")[0] == 200
    status, body, _ = request(port, "GET", "/v1/admin/overrides?rule=nope")
    assert status == 404 and "unknown rule 'nope'" in body["detail"]
    assert request(port, "GET", "/v1/admin/top?rule=nope")[0] == 404
