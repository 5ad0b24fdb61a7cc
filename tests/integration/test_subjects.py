"""Keys built from the request, and network lists (docs/keys-from-requests.md).

A rule's `key` template is filled from the request /v1/check answers: the
client address (behind trusted proxies only: X-Forwarded-For, Forwarded),
IPv4 /24 and IPv6 /64 networks, header fields, the original request nginx's
auth_request forwards (X-Original-*) and verified JWT claims; a part that is
missing is a 400 or the rule's on_missing. Deny and allow lists of networks
answer before a rule counts. check-config and a reload (SIGHUP) refuse what
cannot work, and a refused reload keeps the running config serving.

Every request comes from 127.0.0.1 or ::1; the addresses of other clients
are the ones X-Forwarded-For names."""

import base64
import contextlib
import hashlib
import hmac
import http.client
import json
import random
import re
import subprocess
import time
import urllib.parse

import pytest

from conftest import SOURCE_DIR, CurlResponse, avoid_window_edge, logfmt, metric_value, sanitized
from test_nginx import EXAMPLE, render_conf

try:  # FAIL, do not skip, without them: the `keys` fixture says how to get them
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
except ImportError:
    jwt = None

TRUST = 'server: { trusted_proxies: ["127.0.0.1/32", "::1/128"] }\n'
TRUST_V4 = 'server: { trusted_proxies: ["127.0.0.1/32"] }\n'

NETWORK_RULES = """\
rules:
  per_network: { algorithm: fixed_window, limits: [3/minute], key: "{ip/24}" }
  per_64:      { algorithm: fixed_window, limits: [3/minute], key: "{ip/64}" }
  per_16_48:   { algorithm: fixed_window, limits: [3/minute], key: "{ip/16,48}" }
  per_ip:      { algorithm: fixed_window, limits: [3/minute], key: "{ip}" }
  plain:       { algorithm: fixed_window, limits: [3/minute] }
"""


# --------------------------------------------------------------------------
# Asking floodgate


def check(server, rule: str, headers: dict | None = None, *, key: str | None = None,
          query: str = "", post: bool = False) -> CurlResponse:
    """One /v1/check of `rule` over a fresh connection from 127.0.0.1, with
    no key unless one is given; `query` is appended to a GET's target."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        if post:
            body = {"rule": rule} if key is None else {"rule": rule, "key": key}
            conn.request("POST", "/v1/check", body=json.dumps(body),
                         headers={"Content-Type": "application/json", **(headers or {})})
        else:
            target = f"/v1/check?rule={rule}" + query
            if key is not None:
                target += "&key=" + urllib.parse.quote(key, safe="")
            conn.request("GET", target, headers=headers or {})
        r = conn.getresponse()
        return CurlResponse(r.status, r.reason, r.getheaders(), r.read())
    finally:
        conn.close()


def via(server, rule: str, xff: str, **kw) -> CurlResponse:
    """check() of a request that came through a proxy for `xff`."""
    return check(server, rule, {"X-Forwarded-For": xff}, **kw)


def admitted(r: CurlResponse, key: str, remaining: int | None = None) -> None:
    body = r.json()
    assert r.status == 200 and body["allowed"] is True and body["key"] == key, r
    assert remaining is None or body["remaining"] == remaining, r


def denied(r: CurlResponse, key: str | None = None) -> None:
    body = r.json()
    assert r.status == 429 and body["allowed"] is False, r
    assert key is None or body["key"] == key, r


def problem(r: CurlResponse, status: int, *fragments: str) -> None:
    assert r.status == status, r
    assert r.header("content-type").startswith("application/problem+json"), r
    detail = r.json()["detail"]
    assert all(f in detail for f in fragments), (fragments, r)


def has(r: CurlResponse, status: int, **fields) -> None:
    """The answer has `status` and these fields of its body."""
    body = r.json()
    assert r.status == status and {k: body.get(k) for k in fields} == fields, r


def metrics(server) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def metric_total(text: str, name: str) -> float:
    """The sum of every sample of `name`, whatever its labels."""
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})?\s+(\S+)$", text, re.M))


def reload(server, config_text: str) -> dict[str, str]:
    """Rewrites the config, sends SIGHUP and returns the outcome's log line,
    parsed: msg "config reloaded", or "reload refused…" with its error."""
    mark = server.reload(config_text)
    line = server.wait_for(r"reload refused|config reloaded", start=mark)
    assert line is not None, server.stderr_text()
    return logfmt(line)


def refused(outcome: dict[str, str], words: str) -> None:
    assert outcome.get("msg", "").startswith("reload refused"), outcome
    assert words in outcome.get("error", ""), outcome


def reloaded(outcome: dict[str, str]) -> None:
    assert outcome.get("msg") == "config reloaded", outcome


def check_config(floodgate_bin, path) -> subprocess.CompletedProcess:
    return subprocess.run([str(floodgate_bin), "check-config", str(path)], capture_output=True,
                          text=True, timeout=30)


@contextlib.contextmanager
def logs_on_failure(server, stop_nginx=None, case: str = ""):
    """Adds the case, nginx's and floodgate's logs to an assertion that fails."""
    try:
        yield
    except AssertionError as e:
        nginx_log = f"\nnginx stderr:\n{stop_nginx()}" if stop_nginx else ""
        raise AssertionError(f"{case + ': ' if case else ''}{e}{nginx_log}\n"
                             f"floodgate stderr:\n{server.stderr_text()}") from None


# --------------------------------------------------------------------------
# The client address, its networks and trusted proxies (direct HTTP)


def test_ip24_is_an_ipv4_24_and_an_ipv6_64(start_server):
    server = start_server(TRUST + NETWORK_RULES)
    avoid_window_edge(60)
    for i in range(3):
        admitted(via(server, "per_network", f"198.51.100.{i + 1}"), "198.51.100.0/24", 2 - i)
    denied(via(server, "per_network", "198.51.100.4"), "198.51.100.0/24")
    admitted(via(server, "per_network", "198.51.101.1"), "198.51.101.0/24", 2)
    # IPv6 clients by their /64, under {ip/24} and {ip/64} alike.
    for rule in ("per_network", "per_64"):
        for i in range(3):
            admitted(via(server, rule, f"2001:db8:1:2::{i + 1}"), "2001:db8:1:2::/64", 2 - i)
        denied(via(server, rule, "2001:db8:1:2::4"), "2001:db8:1:2::/64")
        admitted(via(server, rule, "2001:db8:1:3::1"), "2001:db8:1:3::/64", 2)
    # {ip/64} keys an IPv4 client by its whole address; {ip/V4,V6} names both.
    admitted(via(server, "per_64", "198.51.100.1"), "198.51.100.1/32", 2)
    admitted(via(server, "per_16_48", "198.51.100.1"), "198.51.0.0/16", 2)
    admitted(via(server, "per_16_48", "2001:db8:1:2::1"), "2001:db8:1::/48", 2)
    # {ip} is the address, in one spelling (RFC 5952).
    admitted(via(server, "per_ip", "2001:DB8:0:0::1"), "2001:db8::1", 2)
    admitted(via(server, "per_ip", "2001:db8::1"), "2001:db8::1", 1)
    # POST {"rule": …} needs no key either.
    admitted(via(server, "per_network", "198.51.101.2", post=True), "198.51.101.0/24", 1)


def test_a_given_key_is_used_as_given_and_a_plain_rule_needs_one(start_server):
    server = start_server(TRUST + NETWORK_RULES)
    avoid_window_edge(60)
    admitted(via(server, "per_network", "198.51.100.1", key="custom"), "custom", 2)
    admitted(via(server, "per_network", "198.51.100.1", key="custom", post=True), "custom", 1)
    problem(check(server, "plain"), 400, "key")
    problem(check(server, "plain", post=True), 400, "key")


def test_an_untrusted_peer_is_the_client_whatever_it_forwards(start_server):
    server = start_server(NETWORK_RULES)  # no trusted_proxies
    avoid_window_edge(60)
    admitted(via(server, "per_network", "198.51.100.1"), "127.0.0.0/24", 2)
    admitted(via(server, "per_network", "2001:db8:1:2::1"), "127.0.0.0/24", 1)
    admitted(check(server, "per_network", {"Forwarded": "for=198.51.100.1"}), "127.0.0.0/24", 0)
    admitted(via(server, "per_ip", "198.51.100.1, 198.51.100.2"), "127.0.0.1", 2)


def test_the_right_most_untrusted_hop_is_the_client(start_server):
    server = start_server(TRUST_V4 + NETWORK_RULES)
    avoid_window_edge(60)
    admitted(via(server, "per_ip", "6.6.6.6, 198.51.100.9"), "198.51.100.9", 2)
    # Trusted hops are passed over.
    admitted(via(server, "per_ip", "6.6.6.6, 198.51.100.9, 127.0.0.1"), "198.51.100.9", 1)
    # Forwarded when there is no X-Forwarded-For; X-Forwarded-For when both.
    forwarded = 'for=198.51.100.20;proto=https, for="[2001:db8:1:2::9]:443"'
    admitted(check(server, "per_ip", {"Forwarded": forwarded}), "2001:db8:1:2::9", 2)
    admitted(check(server, "per_ip", {"Forwarded": "for=198.51.100.40",
                                      "X-Forwarded-For": "198.51.100.30"}), "198.51.100.30", 2)


def test_ipv4_mapped_clients_keep_their_own_ipv4_networks(start_server):
    # express-rate-limit's CVE-2026-30827: IPv4-mapped IPv6 clients keyed by
    # an IPv6 prefix all fell into ::ffff:0:0/…, one counter for every IPv4
    # client. Here each is its IPv4 address.
    server = start_server(TRUST + NETWORK_RULES)
    avoid_window_edge(60)
    for net in ("198.51.100", "203.0.113", "192.0.2", "198.51.101"):
        admitted(via(server, "per_network", f"::ffff:{net}.1"), f"{net}.0/24", 2)
    admitted(via(server, "per_ip", "::ffff:198.51.100.1"), "198.51.100.1", 2)
    admitted(via(server, "per_64", "::ffff:198.51.100.1"), "198.51.100.1/32", 2)
    admitted(via(server, "per_network", "198.51.100.2"), "198.51.100.0/24", 1)


def test_trusted_proxies_change_on_reload(start_server):
    server = start_server(NETWORK_RULES)
    admitted(via(server, "per_ip", "198.51.100.9"), "127.0.0.1", 2)
    reloaded(reload(server, TRUST_V4 + NETWORK_RULES))
    admitted(via(server, "per_ip", "198.51.100.9"), "198.51.100.9", 2)


# --------------------------------------------------------------------------
# Through nginx's auth_request (examples/nginx/nginx.conf, location /api/)


def nginx_conf(server, rule: str):
    """examples/nginx/nginx.conf for `server`, listening on 127.0.0.1 and
    [::1], its /api/ location asking about `rule`."""
    def render(port, prefix):
        conf = render_conf(server.http_port, port, prefix)
        listen = f"listen 127.0.0.1:{port};"
        conf = conf.replace(listen, f"{listen}\n    listen [::1]:{port};")
        conf, n = re.subn(r"\?rule=per_network&", f"?rule={rule}&", conf)
        assert n == 1, "examples/nginx/nginx.conf no longer asks about rule=per_network"
        return conf
    return render


def through(curl, host: str, port: int, path: str = "/api/", xff: str | None = None,
            method: str | None = None) -> int:
    """The status of one request to nginx (host 127.0.0.1 or [::1]); `xff`
    stands for a proxy in front of nginx, which appends $remote_addr."""
    headers = {"X-Forwarded-For": xff} if xff else None
    return curl(f"http://{host}:{port}{path}", "-g", method=method, headers=headers).status


def stop_cleanly(stop_nginx) -> None:
    err = stop_nginx()
    assert "[emerg]" not in err and "[crit]" not in err, err


def test_through_nginx_one_24_and_one_64_share_a_limit(start_server, nginx, curl):
    server = start_server(TRUST + NETWORK_RULES)
    port, stop_nginx = nginx(nginx_conf(server, "per_network"))
    with logs_on_failure(server, stop_nginx):
        avoid_window_edge(60)
        for last in ("1", "2", "3"):
            assert through(curl, "127.0.0.1", port, xff=f"198.51.100.{last}") == 200, last
        assert through(curl, "127.0.0.1", port, xff="198.51.100.4") == 429
        assert through(curl, "127.0.0.1", port, xff="198.51.101.1") == 200
        for last in ("1", "2", "3"):
            assert through(curl, "[::1]", port, xff=f"2001:db8:1:2::{last}") == 200, last
        assert through(curl, "[::1]", port, xff="2001:db8:1:2::4") == 429
        assert through(curl, "[::1]", port, xff="2001:db8:1:3::1") == 200
        # The counters are the networks', exactly: a fifth check of each is
        # denied, a second of the other /24 and /64 is not.
        denied(check(server, "per_network", key="198.51.100.0/24"))
        denied(check(server, "per_network", key="2001:db8:1:2::/64"))
        admitted(check(server, "per_network", key="198.51.101.0/24"), "198.51.101.0/24", 1)
        admitted(check(server, "per_network", key="2001:db8:1:3::/64"), "2001:db8:1:3::/64", 1)
    stop_cleanly(stop_nginx)


def test_through_nginx_the_original_method_path_and_query(start_server, nginx, curl):
    server = start_server(TRUST + "rules:\n  shape: { algorithm: fixed_window, limits: [1/minute],"
                          ' key: "{method}|{path:2}|{query:q}" }\n')
    port, stop_nginx = nginx(nginx_conf(server, "shape"))
    with logs_on_failure(server, stop_nginx):
        avoid_window_edge(60)
        assert through(curl, "127.0.0.1", port, "/api/v2/users?q=a%20b") == 200
        # The same method, second segment and q: the same key.
        assert through(curl, "127.0.0.1", port, "/api/v2/other?x=1&q=a%20b") == 429
        assert through(curl, "127.0.0.1", port, "/api/v3/users?q=a%20b") == 200
        assert through(curl, "127.0.0.1", port, "/api/v2/users?q=c") == 200
        # Admitted (another method), then nginx's static files refuse DELETE.
        assert through(curl, "127.0.0.1", port, "/api/v2/users?q=a%20b", method="DELETE") == 405
        assert through(curl, "127.0.0.1", port, "/api/v2/users?q=a%20b", method="DELETE") == 429
        denied(check(server, "shape", key="GET|v2|a b"))
        denied(check(server, "shape", key="DELETE|v2|a b"))
        denied(check(server, "shape", key="GET|v3|a b"))
        admitted(check(server, "shape", key="GET|v4|a b"), "GET|v4|a b", 0)
    stop_cleanly(stop_nginx)


ORIGINAL = {"X-Original-Method": "DELETE", "X-Original-URI": "/api/v9/x?q=theirs",
            "X-Original-Host": "API.Example.COM:8443"}
SHAPE = ('rules:\n  shape: { algorithm: fixed_window, limits: [3/minute],'
         ' key: "{method}|{path:2}|{query:q}|{host}" }\n')
SHAPE_LINE = ('rules:\n  line: { algorithm: fixed_window, limits: [3/minute],'
              ' key: "{method}|{path:2}|{host}" }\n')


def test_the_original_request_only_from_a_trusted_peer(start_server):
    # From an untrusted peer the X-Original-* fields are the client's word:
    # the request itself is read (/v1/check takes no other query
    # parameter, so {query:q} is missing there).
    untrusted = start_server(SHAPE)
    r = check(untrusted, "shape", ORIGINAL)
    assert r.status == 400 and "{query:q} is missing" in r.json()["detail"], r
    assert "theirs" not in r.body.decode()
    untrusted_line = start_server(SHAPE_LINE)
    admitted(check(untrusted_line, "line", ORIGINAL), "GET|check|127.0.0.1")
    trusted = start_server(TRUST + SHAPE)
    admitted(check(trusted, "shape", ORIGINAL), "DELETE|v9|theirs|api.example.com")


# --------------------------------------------------------------------------
# Header fields, and what a missing part does


HEADER_RULES = """\
rules:
  by_key:       { algorithm: fixed_window, limits: [2/minute], key: "key:{header:x-api-key}" }
  by_key_deny:  { algorithm: fixed_window, limits: [2/minute], key: "{header:x-api-key}",
                  on_missing: deny }
  by_key_allow: { algorithm: fixed_window, limits: [2/minute], key: "{header:x-api-key}",
                  on_missing: allow }
  by_key_skip:  { algorithm: fixed_window, limits: [2/minute], key: "{header:x-api-key}",
                  on_missing: skip }
"""


def test_an_api_key_from_a_header(start_server):
    server = start_server(HEADER_RULES)
    avoid_window_edge(60)
    admitted(check(server, "by_key", {"X-Api-Key": "k1"}), "key:k1", 1)
    admitted(check(server, "by_key", {"X-API-KEY": "k1"}), "key:k1", 0)
    denied(check(server, "by_key", {"x-api-key": "k1"}), "key:k1")
    admitted(check(server, "by_key", {"X-Api-Key": "k2"}), "key:k2", 1)
    # Missing (absent or empty): a clear 400 by default.
    problem(check(server, "by_key"), 400, "{header:x-api-key}", "missing")
    problem(check(server, "by_key", {"X-Api-Key": ""}), 400, "{header:x-api-key}")
    # A key past 512 bytes is refused, not cut.
    problem(check(server, "by_key", {"X-Api-Key": "k" * 600}), 400)
    fields = {"missing": "header:x-api-key"}
    has(check(server, "by_key_deny"), 429, allowed=False, reason="missing", rule="by_key_deny",
        **fields)
    has(check(server, "by_key_deny", query="&deny_status=403"), 403, allowed=False,
        reason="missing", **fields)
    has(check(server, "by_key_allow"), 200, allowed=True, reason="missing", rule="by_key_allow",
        **fields)
    has(check(server, "by_key_skip"), 200, allowed=True, skipped=True, rule="by_key_skip",
        **fields)
    m = metrics(server)
    assert metric_value(m, "floodgate_key_missing_total",
                        {"rule": "by_key", "part": "header:x-api-key"}) == 2, m
    assert metric_value(m, "floodgate_key_missing_total",
                        {"rule": "by_key_deny", "part": "header:x-api-key"}) == 2, m


# --------------------------------------------------------------------------
# JWT: keys, a JWK Set, tokens

ISSUER = "https://id.example.test"
AUDIENCE = "api"
HS256_SECRET = "floodgate-test-hs256-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def keys():
    if jwt is None:
        pytest.fail("PyJWT and cryptography are missing: apt-get install -y python3-jwt "
                    "python3-cryptography (scripts/setup.sh does it), and run the tests with "
                    "/usr/bin/python3", pytrace=False)
    return {"rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "rsa_other": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "ec": ec.generate_private_key(ec.SECP256R1()),
            "rsa_1024": rsa.generate_private_key(public_exponent=65537, key_size=1024)}


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64u_int(n: int, size: int = 0) -> str:
    return b64u(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


def rsa_jwk(key, kid: str) -> dict:
    pub = key.public_key().public_numbers()
    return {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
            "n": b64u_int(pub.n), "e": b64u_int(pub.e)}


def ec_jwk(key, kid: str) -> dict:
    pub = key.public_key().public_numbers()
    return {"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
            "x": b64u_int(pub.x, 32), "y": b64u_int(pub.y, 32)}


def write_jwks(path, *jwks: dict) -> None:
    path.write_text(json.dumps({"keys": list(jwks)}, indent=2))


def jwt_section(jwks_path, extra: str = "") -> str:
    return (f'jwt: {{ jwks_file: {jwks_path}, issuer: "{ISSUER}", audience: "{AUDIENCE}"'
            f"{extra} }}\n")


def claims(sub, **changes) -> dict:
    now = int(time.time())
    return {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **changes}


def signed(key, alg: str, sub, kid: str | None = None, **changes) -> str:
    return jwt.encode(claims(sub, **changes), key, algorithm=alg,
                      headers={"kid": kid} if kid else None)


def by_hand(header: dict, payload: dict, sign=lambda signing_input: b"") -> str:
    """A token written without PyJWT, which refuses to make the bad ones."""
    signing_input = f"{b64u(json.dumps(header).encode())}.{b64u(json.dumps(payload).encode())}"
    return f"{signing_input}.{b64u(sign(signing_input.encode()))}"


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


JWT_RULES = """\
rules:
  per_user:      { algorithm: fixed_window, limits: [2/minute], key: "{jwt:sub}" }
  per_user_deny: { algorithm: fixed_window, limits: [2/minute], key: "{jwt:sub}", on_missing: deny }
  per_uid:       { algorithm: fixed_window, limits: [2/minute], key: "uid:{jwt:uid}" }
"""


def jwt_server(start_server, tmp_dir, keys, extra: str = "", env: dict | None = None):
    write_jwks(tmp_dir / "jwks.json", rsa_jwk(keys["rsa"], "rsa1"), ec_jwk(keys["ec"], "ec1"))
    return start_server(jwt_section(tmp_dir / "jwks.json", extra) + JWT_RULES, env=env)


def test_verified_jwt_claims_are_keys(start_server, tmp_dir, keys):
    server = jwt_server(start_server, tmp_dir, keys)
    avoid_window_edge(60)
    alice = bearer(signed(keys["rsa"], "RS256", "alice", "rsa1"))
    admitted(check(server, "per_user", alice), "alice", 1)
    admitted(check(server, "per_user", alice), "alice", 0)
    denied(check(server, "per_user", alice), "alice")
    admitted(check(server, "per_user", bearer(signed(keys["rsa"], "RS256", "bob", "rsa1"))),
             "bob", 1)
    carol = bearer(signed(keys["ec"], "ES256", "carol", "ec1"))
    admitted(check(server, "per_user", carol), "carol", 1)
    admitted(check(server, "per_user", carol), "carol", 0)
    # Expired 10 s ago: inside the default leeway of 30 s.
    dave = signed(keys["rsa"], "RS256", "dave", "rsa1", exp=int(time.time()) - 10)
    admitted(check(server, "per_user", bearer(dave)), "dave", 1)
    # An integer claim is its decimal text; a list is no claim a key can use.
    admitted(check(server, "per_uid", bearer(signed(keys["ec"], "ES256", "e", "ec1", uid=42))),
             "uid:42", 1)
    problem(check(server, "per_uid", bearer(signed(keys["ec"], "ES256", "e", "ec1", uid=[4]))),
            400, "{jwt:uid}")
    # No bearer token: missing.
    problem(check(server, "per_user"), 400, "{jwt:sub}", "missing")
    problem(check(server, "per_user", {"Authorization": "Basic YWxpY2U6cHc="}), 400, "{jwt:sub}")


def test_invalid_tokens_make_jwt_parts_missing(start_server, tmp_dir, keys):
    server = jwt_server(start_server, tmp_dir, keys)  # no HS256 secret
    avoid_window_edge(60)
    now = int(time.time())
    rsa_key = keys["rsa"]
    public_pem = rsa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    bad = {  # what is wrong -> the metric's reason, where docs/design.md names it
        "expired": (signed(rsa_key, "RS256", "mallory", "rsa1", exp=now - 60), "expired"),
        "not yet valid": (signed(rsa_key, "RS256", "mallory", "rsa1", nbf=now + 3600),
                          "not_yet_valid"),
        "another key, same kid": (signed(keys["rsa_other"], "RS256", "mallory", "rsa1"),
                                  "bad_signature"),
        "another issuer": (signed(rsa_key, "RS256", "mallory", "rsa1",
                                  iss="https://other.example.test"), "wrong_issuer"),
        "another audience": (signed(rsa_key, "RS256", "mallory", "rsa1", aud="other"),
                             "wrong_audience"),
        "alg none": (by_hand({"alg": "none", "typ": "JWT"}, claims("mallory")), None),
        # HS256 keyed with the RSA public key's PEM (RFC 8725 2.1), no
        # HS256 secret configured.
        "HS256 with the public key": (by_hand(
            {"alg": "HS256", "typ": "JWT", "kid": "rsa1"}, claims("mallory"),
            lambda data: hmac.new(public_pem, data, hashlib.sha256).digest()), None),
    }
    admitted(check(server, "per_user", bearer(signed(rsa_key, "RS256", "alice", "rsa1"))),
             "alice", 1)
    before = metrics(server)
    for what, (token, _) in bad.items():
        with logs_on_failure(server, case=what):
            problem(check(server, "per_user", bearer(token)), 400, "{jwt:sub}")
            has(check(server, "per_user_deny", bearer(token)), 429, allowed=False,
                reason="missing", missing="jwt:sub", rule="per_user_deny")
    after = metrics(server)
    assert (metric_total(after, "floodgate_jwt_rejected_total")
            - metric_total(before, "floodgate_jwt_rejected_total")) >= len(bad), after
    for what, (_, reason) in bad.items():
        if reason is not None:
            assert (metric_value(after, "floodgate_jwt_rejected_total", {"reason": reason}) or 0
                    ) >= 1, (what, after)
    # None of them counted for their sub.
    admitted(check(server, "per_user", key="mallory"), "mallory", 1)


def test_hs256_with_the_secret_from_the_environment(start_server, tmp_dir, keys):
    server = jwt_server(start_server, tmp_dir, keys, ", hs256_secret_env: FG_JWT_SECRET",
                        env={"FG_JWT_SECRET": HS256_SECRET})
    erin = bearer(signed(HS256_SECRET.encode(), "HS256", "erin"))
    admitted(check(server, "per_user", erin), "erin", 1)
    other = signed(b"another-secret-of-at-least-32-bytes-0000", "HS256", "erin")
    problem(check(server, "per_user", bearer(other)), 400, "{jwt:sub}")
    # The JWK Set's keys still verify their tokens.
    admitted(check(server, "per_user", bearer(signed(keys["rsa"], "RS256", "alice", "rsa1"))),
             "alice", 1)


def test_the_token_beside_floodgates_own(start_server, floodgate_bin, tmp_dir, keys):
    # With server.auth_token_env, Authorization carries floodgate's token:
    # the client's comes in jwt.header, and a config that would read
    # floodgate's own token as the client's is refused.
    token_env = {"FG_DATA_TOKEN": "data-token-of-some-length"}
    write_jwks(tmp_dir / "jwks.json", rsa_jwk(keys["rsa"], "rsa1"))
    clash = ("server: { auth_token_env: FG_DATA_TOKEN }\n"
             + jwt_section(tmp_dir / "jwks.json") + JWT_RULES)
    path = tmp_dir / "clash.yaml"
    path.write_text(clash)
    out = check_config(floodgate_bin, path)
    assert out.returncode == 1 and "jwt.header" in out.stderr, out.stderr
    server = start_server(
        "server: { auth_token_env: FG_DATA_TOKEN }\n"
        + jwt_section(tmp_dir / "jwks.json", ", header: X-Client-Authorization") + JWT_RULES,
        env=token_env)
    alice = signed(keys["rsa"], "RS256", "alice", "rsa1")
    ours = {"Authorization": "Bearer data-token-of-some-length"}
    admitted(check(server, "per_user", {**ours, "X-Client-Authorization": f"Bearer {alice}"}),
             "alice", 1)
    # Floodgate's token is not the client's; without floodgate's, 401.
    problem(check(server, "per_user", ours), 400, "{jwt:sub}")
    assert check(server, "per_user", {"X-Client-Authorization": f"Bearer {alice}"}).status == 401


def test_the_jwks_file_is_read_again_on_sighup(start_server, tmp_dir, keys):
    write_jwks(tmp_dir / "jwks.json", rsa_jwk(keys["rsa"], "rsa1"))
    config = jwt_section(tmp_dir / "jwks.json") + JWT_RULES
    server = start_server(config)
    old = bearer(signed(keys["rsa"], "RS256", "alice", "rsa1"))
    new = bearer(signed(keys["rsa_other"], "RS256", "bob", "rsa2"))
    admitted(check(server, "per_user", old), "alice", 1)
    write_jwks(tmp_dir / "jwks.json", rsa_jwk(keys["rsa_other"], "rsa2"))
    problem(check(server, "per_user", new), 400, "{jwt:sub}")  # not before the reload
    reloaded(reload(server, config))
    admitted(check(server, "per_user", new), "bob", 1)
    problem(check(server, "per_user", old), 400, "{jwt:sub}")


# --------------------------------------------------------------------------
# Deny and allow lists


DENY_FILE = """\
# addresses seen scanning, one network a line
203.0.113.0/24        # a whole network
198.51.100.7
\t2001:db8:bad::/48\r
192.0.2.66            # in partners too: the deny list wins
"""


def lists_config(deny_path) -> str:
    return TRUST + f"""\
lists:
  bad: {{ file: {deny_path} }}
  partners: {{ cidrs: ["192.0.2.0/24", "2001:db8:feed::/48"] }}
rules:
  gate:  {{ algorithm: fixed_window, limits: [3/minute], key: "{{ip/24}}",
           deny_list: bad, allow_list: partners }}
  plain: {{ algorithm: fixed_window, limits: [3/minute], deny_list: bad }}
"""


def deny_listed(r: CurlResponse, rule: str) -> None:
    has(r, 429, allowed=False, reason="deny_list", list="bad", rule=rule)
    assert r.header("retry-after") is None, r


def test_deny_and_allow_lists(start_server, tmp_dir):
    import redis  # python3-redis
    (tmp_dir / "deny.txt").write_text(DENY_FILE)
    server = start_server(lists_config(tmp_dir / "deny.txt"))
    avoid_window_edge(60)
    # Denied without touching the rule's state: the /24's next address has
    # the whole limit.
    deny_listed(via(server, "gate", "198.51.100.7"), "gate")
    deny_listed(via(server, "gate", "198.51.100.7"), "gate")
    admitted(via(server, "gate", "198.51.100.8"), "198.51.100.0/24", 2)
    deny_listed(via(server, "gate", "203.0.113.200"), "gate")
    deny_listed(via(server, "gate", "2001:db8:bad:1::1"), "gate")
    admitted(via(server, "gate", "2001:db8:bad1::1"), "2001:db8:bad1::/64", 2)
    # Admitted past the limit, nothing counted.
    for _ in range(5):
        has(via(server, "gate", "192.0.2.10"), 200, allowed=True, reason="allow_list",
            list="partners", rule="gate")
    admitted(check(server, "gate", key="192.0.2.0/24"), "192.0.2.0/24", 2)
    deny_listed(via(server, "gate", "192.0.2.66"), "gate")
    # A given key that is an address is what the lists test.
    deny_listed(check(server, "plain", key="198.51.100.7"), "plain")
    deny_listed(check(server, "plain", key="2001:db8:bad::1"), "plain")
    admitted(check(server, "plain", key="user:7"), "user:7", 2)
    # RESP: FG.CHECK answers a deny-listed address as a denial, retry -1.
    r = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=10)
    try:
        reply = [int(x) for x in r.execute_command("FG.CHECK", "plain", "198.51.100.7")]
        assert reply[0] == 0 and reply[3] == -1, reply
        reply = [int(x) for x in r.execute_command("FG.CHECK", "gate", "203.0.113.9")]
        assert reply[0] == 0 and reply[3] == -1, reply
        assert int(r.execute_command("FG.CHECK", "plain", "198.51.100.9")[0]) == 1
        assert int(r.execute_command("FG.CHECK", "gate", "192.0.2.10")[0]) == 1
    finally:
        r.close()
    m = metrics(server)
    entries = {name: metric_value(m, "floodgate_list_entries", {"list": name})
               for name in ("bad", "partners")}
    assert entries == {"bad": 4, "partners": 2}, m
    matches = {(name, rule, action): metric_value(
        m, "floodgate_list_matches_total", {"list": name, "rule": rule, "action": action})
        for name, rule, action in (("bad", "gate", "deny"), ("bad", "plain", "deny"),
                                   ("partners", "gate", "allow"))}
    assert matches == {("bad", "gate", "deny"): 6, ("bad", "plain", "deny"): 3,
                       ("partners", "gate", "allow"): 6}, m


def many_networks(n: int) -> tuple[list[str], str, str]:
    """n networks, IPv4 and IPv6 in turn, shuffled; and an address of
    each family inside one of them."""
    lines = []
    for i in range(n // 2):
        lines.append(f"10.{i >> 8 & 255}.{i & 255}.0/{(24, 28, 32)[i % 3]}")
        lines.append(f"2001:db8:{i:x}::/{(48, 56, 64)[i % 3]}")
    random.Random(31).shuffle(lines)
    return lines, "10.1.2.3", "2001:db8:102::5"  # i = 258: a /24 and a /48


def rss_kb(server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_a_deny_list_of_100000_networks(start_server, tmp_dir):
    lines, inside_v4, inside_v6 = many_networks(100_000)
    (tmp_dir / "big.txt").write_text("# generated\n" + "\n".join(lines) + "\n")
    rule = '  gate: { algorithm: fixed_window, limits: [100/minute], key: "{ip}"%s }\n'
    without = start_server(TRUST + "rules:\n" + rule % "")
    server = start_server(TRUST + f"lists:\n  big: {{ file: {tmp_dir / 'big.txt'} }}\nrules:\n"
                          + rule % ", deny_list: big")
    for s in (without, server):
        for xff in (inside_v4, inside_v6, "10.200.0.1", "2001:db9::1"):
            via(s, "gate", xff)
    deny_listed_big = dict(allowed=False, reason="deny_list", list="big", rule="gate")
    has(via(server, "gate", inside_v4), 429, **deny_listed_big)
    has(via(server, "gate", inside_v6), 429, **deny_listed_big)
    has(via(server, "gate", "10.1.3.1"), 429, **deny_listed_big)  # i = 259: a /28
    admitted(via(server, "gate", "10.1.3.16"), "10.1.3.16")        # past that /28
    admitted(via(server, "gate", "10.200.0.1"), "10.200.0.1")
    admitted(via(server, "gate", "2001:db9::1"), "2001:db9::1")
    m = metrics(server)
    assert metric_value(m, "floodgate_list_entries", {"list": "big"}) == 100_000, m
    if not sanitized(server.proc.pid):
        grown = rss_kb(server) - rss_kb(without)
        assert grown < 64 * 1024, f"the list costs {grown} kB of RSS"


def test_a_list_file_with_a_bad_line_refuses_the_reload(start_server, tmp_dir):
    deny = tmp_dir / "deny.txt"
    deny.write_text(DENY_FILE)
    config = lists_config(deny)
    server = start_server(config)
    deny_listed(via(server, "gate", "198.51.100.7"), "gate")
    admitted(via(server, "gate", "198.51.100.8"), "198.51.100.0/24")
    deny.write_text("198.51.100.7\n198.51.100.8\n10.0.0.0/33\n")
    refused(reload(server, config), "deny.txt:3")
    deny_listed(via(server, "gate", "198.51.100.7"), "gate")
    deny_listed(via(server, "gate", "203.0.113.1"), "gate")  # the old list, whole
    admitted(via(server, "gate", "198.51.100.8"), "198.51.100.0/24")
    deny.write_text("198.51.100.7\n198.51.100.8\n")
    reloaded(reload(server, config))
    deny_listed(via(server, "gate", "198.51.100.8"), "gate")
    admitted(via(server, "gate", "203.0.113.1"), "203.0.113.0/24")


# --------------------------------------------------------------------------
# What check-config and a reload refuse


def subjects_config(tmp_dir, *, template: str = "{ip/24}", on_missing: str = "deny",
                    deny_list: str = "bad", with_jwt: bool = True) -> str:
    return (TRUST_V4
            + (jwt_section(tmp_dir / "jwks.json") if with_jwt else "")
            + f"lists:\n  bad: {{ file: {tmp_dir / 'deny.txt'} }}\n"
            + "rules:\n"
            + f'  per_network: {{ algorithm: fixed_window, limits: [3/minute], key: "{template}",'
              f" deny_list: {deny_list} }}\n"
            + '  per_user: { algorithm: fixed_window, limits: [3/minute], key: "{jwt:sub}",'
              f" on_missing: {on_missing} }}\n")


def write_good_files(tmp_dir, keys) -> None:
    write_jwks(tmp_dir / "jwks.json", rsa_jwk(keys["rsa"], "rsa1"))
    (tmp_dir / "deny.txt").write_text("# scanners\n203.0.113.0/24\n")


def break_file(tmp_dir, keys, what: str | None) -> None:
    if what == "jwks_1024":
        write_jwks(tmp_dir / "jwks.json", rsa_jwk(keys["rsa_1024"], "rsa1"))
    elif what == "jwks_broken_n":
        write_jwks(tmp_dir / "jwks.json", {**rsa_jwk(keys["rsa"], "rsa1"), "n": "n*is*not*base64"})
    elif what == "list_line_3":
        (tmp_dir / "deny.txt").write_text("# scanners\n203.0.113.0/24\n10.0.0.0/33\n")


BAD_CONFIGS = [  # (config changes, file broken, words the error must hold)
    pytest.param({"template": "{nope}"}, None, "nope", id="unknown-part"),
    pytest.param({"template": "{ip/33}"}, None, "ip/33", id="ip-33"),
    pytest.param({"template": "{ip/129}"}, None, "ip/129", id="ip-129"),
    pytest.param({"with_jwt": False}, None, "jwt", id="jwt-part-without-jwt-section"),
    pytest.param({"on_missing": "maybe"}, None, "maybe", id="on_missing-maybe"),
    pytest.param({"deny_list": "nowhere"}, None, "nowhere", id="unknown-list"),
    pytest.param({}, "jwks_1024", "jwks.json", id="jwks-rsa-1024"),
    pytest.param({}, "jwks_broken_n", "jwks.json", id="jwks-broken-n"),
    pytest.param({}, "list_line_3", "deny.txt:3", id="list-bad-line-3"),
]


def test_check_config_accepts_the_good_config(floodgate_bin, tmp_dir, keys):
    write_good_files(tmp_dir, keys)
    path = tmp_dir / "good.yaml"
    path.write_text(subjects_config(tmp_dir))
    out = check_config(floodgate_bin, path)
    assert out.returncode == 0, out.stderr
    assert "OK" in out.stdout, out.stdout


@pytest.mark.parametrize("changes,broken,words", BAD_CONFIGS)
def test_check_config_refuses(floodgate_bin, tmp_dir, keys, changes, broken, words):
    write_good_files(tmp_dir, keys)
    break_file(tmp_dir, keys, broken)
    path = tmp_dir / "bad.yaml"
    path.write_text(subjects_config(tmp_dir, **changes))
    out = check_config(floodgate_bin, path)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert words in out.stderr, out.stderr


def still_serving(server, token: str) -> None:
    """What the good config does: its template, its list, its JWK Set and
    its on_missing."""
    admitted(via(server, "per_network", "198.51.100.1"), "198.51.100.0/24")
    has(via(server, "per_network", "203.0.113.9"), 429, reason="deny_list", list="bad")
    admitted(check(server, "per_user", bearer(token)), "alice")
    has(check(server, "per_user"), 429, reason="missing", missing="jwt:sub")


@pytest.mark.parametrize("changes,broken,words", BAD_CONFIGS)
def test_a_reload_refuses(start_server, tmp_dir, keys, changes, broken, words):
    write_good_files(tmp_dir, keys)
    server = start_server(subjects_config(tmp_dir))
    token = signed(keys["rsa"], "RS256", "alice", "rsa1")
    still_serving(server, token)
    break_file(tmp_dir, keys, broken)
    refused(reload(server, subjects_config(tmp_dir, **changes)), words)
    still_serving(server, token)


# --------------------------------------------------------------------------
# docs/keys-from-requests.md shows the example's nginx lines


def nginx_block(text: str, opening: str) -> list[str]:
    """The lines of the block that starts with `opening` (braces counted),
    stripped."""
    start = text.index(opening)
    depth, end = 0, start
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0 and text[end] == "}":
            break
    return [line.strip() for line in text[start:end + 1].splitlines()]


def test_the_docs_nginx_lines_are_the_examples():
    docs = (SOURCE_DIR / "docs" / "keys-from-requests.md").read_text()
    blocks = re.findall(r"```nginx\n(.*?)```", docs, re.S)
    assert blocks, "docs/keys-from-requests.md has no nginx block"
    example = (EXAMPLE / "nginx.conf").read_text()
    for opening in ("location /api/ {", "location = /_floodgate_api {"):
        assert any(opening in b and nginx_block(b, opening) == nginx_block(example, opening)
                   for b in blocks), f"docs/keys-from-requests.md does not show {opening!r} " \
                                     "as examples/nginx/nginx.conf has it"


def test_a_network_block_holds_the_client_of_a_templated_rule(start_server):
    # {ip/24} builds "198.51.100.0/24", which is no address: the block is
    # tested against the client the request came from.
    server = start_server(TRUST + NETWORK_RULES)
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        conn.request("PUT", "/v1/admin/blocks/cidr/198.51.100.0/28",
                     body=json.dumps({"ttl_ms": 60000, "reason": "scanner"}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200, r.read()
        r.read()
    finally:
        conn.close()
    r = via(server, "per_network", "198.51.100.9")
    has(r, 429, allowed=False, blocked=True, reason="scanner", key="198.51.100.0/24")
    assert 55 <= int(r.header("Retry-After")) <= 60, r
    # Outside the /28, in the same /24: admitted, counted on the /24.
    admitted(via(server, "per_network", "198.51.100.17"), "198.51.100.0/24", 2)
    admitted(via(server, "per_ip", "198.51.100.18"), "198.51.100.18", 2)
    has(via(server, "per_ip", "198.51.100.1"), 429, blocked=True, reason="scanner")
