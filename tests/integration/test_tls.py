"""TLS on the RESP, HTTP and gRPC listeners, with real clients: curl
--cacert (HTTPS; a wrong CA refused; mTLS), redis-cli --tls (FG.CHECK, an
admin command by client certificate), grpc-js with TLS credentials
(ShouldRateLimit), Python's ssl module (the certificate's serial across a
SIGHUP reload and a change of the files on disk), plaintext sent to a TLS
port refused; and the config's mistakes stopped at check-config and at
start with the file named."""

import json
import os
import signal
import socket
import ssl
import subprocess
from pathlib import Path

import pytest

from conftest import NODE_GRPC_DIR, metric_value, require_tool, until

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(*args, cwd: Path) -> str:
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def make_certs(d: Path) -> None:
    """A CA, two server certificates it signs (server, next), a client
    certificate it signs for CN ops.example.com (client), another CA nobody
    trusts, and a client certificate that one signs for the same name
    (stranger)."""
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj",
            "/CN=test-ca", cwd=d)
    openssl("req", "-x509", *EC, "-keyout", "other-ca.key", "-out", "other-ca.pem", "-days", "30",
            "-subj", "/CN=other-ca", cwd=d)
    for name in ("server", "next"):
        openssl("req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                "/CN=localhost", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "30", "-out", f"{name}.pem", "-extfile", "server.ext",
                cwd=d)
    for name, ca in (("client", "ca"), ("stranger", "other-ca")):
        openssl("req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                "/CN=ops.example.com", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "30", "-out", f"{name}.pem", cwd=d)


def serial_of(pem: Path) -> str:
    return openssl("x509", "-serial", "-noout", "-in", str(pem), cwd=pem.parent).strip().split(
        "=")[1].upper()


@pytest.fixture
def certs(tmp_dir):
    require_tool("openssl", "openssl")
    d = tmp_dir / "tls"
    d.mkdir()
    make_certs(d)
    return d


def config(d: Path, cert="server.pem", key="server.key") -> str:
    return (f"tls: {{ cert_file: {d / cert}, key_file: {d / key} }}\n"
            "listen_tls: { resp: true, http: true }\n"
            "rules:\n  api: { algorithm: fixed_window, limits: [5/minute] }\n")


def peer_serial(port: int, ca: Path, alpn: str | None = None) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    if alpn:
        ctx.set_alpn_protocols([alpn])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.getpeercert()["serialNumber"].upper()


def test_https_and_resp_over_tls_with_real_clients(start_server, certs, curl_bin):
    server = start_server(config(certs))
    assert server.listening["tls"] == "resp,http"
    base = f"https://127.0.0.1:{server.http_port}"
    out = subprocess.run([curl_bin, "-s", "--cacert", str(certs / "ca.pem"), f"{base}/healthz"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and '"ok"' in out.stdout, out
    out = subprocess.run([curl_bin, "-s", "--cacert", str(certs / "ca.pem"), "-X", "POST",
                          f"{base}/v1/check", "-d", '{"rule":"api","key":"k"}'],
                         capture_output=True, text=True, timeout=10)
    assert '"allowed":true' in out.stdout, out
    # A client trusting another CA refuses the server (curl's 60: peer
    # certificate cannot be authenticated).
    out = subprocess.run([curl_bin, "-s", "--cacert", str(certs / "other-ca.pem"),
                          f"{base}/healthz"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 60, out
    # Plain HTTP to the TLS port gets no answer.
    out = subprocess.run([curl_bin, "-s", f"http://127.0.0.1:{server.http_port}/healthz"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and "ok" not in out.stdout
    cli = require_tool("redis-cli", "redis-tools")
    out = subprocess.run([cli, "--tls", "--cacert", str(certs / "ca.pem"), "-p",
                          str(server.resp_port), "FG.CHECK", "api", "k"],
                         capture_output=True, text=True, timeout=10)
    assert out.stdout.split()[:3] == ["1", "5", "3"], out


def test_sighup_reloads_the_certificate_and_keeps_a_bad_one_out(start_server, certs):
    server = start_server(config(certs))
    ca = certs / "ca.pem"
    assert peer_serial(server.http_port, ca) == serial_of(certs / "server.pem")
    # A key that does not match: refused, the old certificate serves on.
    mark = server.reload(config(certs, "next.pem", "server.key"))
    assert server.wait_for("tls reload refused", 5, start=mark), server.stderr_text()
    assert "does not match the certificate" in server.stderr_text()
    assert peer_serial(server.http_port, ca) == serial_of(certs / "server.pem")
    # The new pair: new connections get it.
    mark = server.reload(config(certs, "next.pem", "next.key"))
    assert server.wait_for("msg=\"tls reloaded\"", 5, start=mark), server.stderr_text()
    assert peer_serial(server.http_port, ca) == serial_of(certs / "next.pem")
    assert peer_serial(server.resp_port, ca) == serial_of(certs / "next.pem")


def test_bad_tls_configs_stop_check_config_and_the_start(floodgate_bin, start_server, certs,
                                                         tmp_dir):
    cases = {
        "listen_tls: { http: true }\nrules:\n  api: { limits: [5/minute] }\n":
            "listen_tls.http is on but there is no tls section (cert_file and key_file)",
        config(certs, "missing.pem"): f"tls.cert_file '{certs / 'missing.pem'}': No such file",
        config(certs, "server.pem", "next.key"): "does not match the certificate",
        f"tls: {{ key_file: {certs / 'server.key'} }}\nrules:\n  api: {{ limits: [5/minute] }}\n":
            "tls needs cert_file",
    }
    for text, want in cases.items():
        path = tmp_dir / "bad.yaml"
        path.write_text(text)
        out = subprocess.run([str(floodgate_bin), "check-config", str(path)], capture_output=True,
                             text=True, timeout=10)
        assert out.returncode == 1 and want in out.stderr, (text, out.stderr)
        server = start_server(text, wait_listening=False)
        assert server.wait_exit(10) not in (None, 0)
        assert want in server.stderr_text(), server.stderr_text()


ENVOY_DOMAIN = """\
domain: tls
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
"""


def grpc_call(node, port, env, descriptor_value="u1"):
    """One ShouldRateLimit with grpc-js (tests/integration/node_grpc/call.js):
    (exit code, stdout, stderr)."""
    request = ('{"domain":"tls","descriptors":[{"entries":[{"key":"user","value":"'
               + descriptor_value + '"}]}]}')
    out = subprocess.run([node, "call.js", str(port), request], cwd=NODE_GRPC_DIR,
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=30)
    return out.returncode, out.stdout, out.stderr


def test_grpc_over_tls_with_grpc_js(start_server, certs, tmp_dir, node_ready):
    envoy = tmp_dir / "envoy"
    envoy.mkdir()
    (envoy / "tls.yaml").write_text(ENVOY_DOMAIN)
    text = (f"tls: {{ cert_file: {certs / 'server.pem'}, key_file: {certs / 'server.key'} }}\n"
            "listen_tls: { grpc: true }\n"
            f"envoy_ratelimit: {{ files: [{envoy}] }}\n")
    server = start_server(text, grpc="127.0.0.1:0")
    assert server.listening["tls"] == "grpc"
    trusting = {"FG_GRPC_CA": str(certs / "ca.pem")}
    codes = []
    for _ in range(3):
        rc, out, err = grpc_call(node_ready, server.grpc_port, trusting)
        assert rc == 0, err
        codes.append(json.loads(out)["overall_code"])
    assert codes == ["OK", "OK", "OVER_LIMIT"]
    # Another CA, and plaintext: no call is made.
    rc, _, err = grpc_call(node_ready, server.grpc_port, {"FG_GRPC_CA": str(certs / "other-ca.pem")})
    assert rc == 1 and "UNAVAILABLE" in err, err
    rc, _, err = grpc_call(node_ready, server.grpc_port, {})
    assert rc == 1, err
    # The files change on disk, no signal: new connections get the new
    # certificate (gRPC as the other fronts), calls go on.
    ca = certs / "ca.pem"
    assert peer_serial(server.grpc_port, ca, "h2") == serial_of(certs / "server.pem")
    for name in ("key", "pem"):
        (certs / f"server.{name}.new").write_bytes((certs / f"next.{name}").read_bytes())
        os.replace(certs / f"server.{name}.new", certs / f"server.{name}")
    assert until(lambda: peer_serial(server.grpc_port, ca, "h2") == serial_of(certs / "next.pem"),
                 10), server.stderr_text()
    assert "trigger=\"files changed\"" in server.stderr_text()
    rc, out, err = grpc_call(node_ready, server.grpc_port, trusting, "u2")
    assert rc == 0 and json.loads(out)["overall_code"] == "OK", err


def mtls_config(d: Path, require: bool) -> str:
    return (f"tls: {{ cert_file: {d / 'server.pem'}, key_file: {d / 'server.key'}, "
            f"client_ca_file: {d / 'ca.pem'}, require_client_cert: {str(require).lower()} }}\n"
            "listen_tls: { resp: true, http: true }\n"
            "admin: { token_env: FG_TEST_ADMIN, client_names: [ops.example.com] }\n"
            "rules:\n  api: { algorithm: fixed_window, limits: [5/minute] }\n")


def test_mtls_client_names_are_admins_and_the_change_log_names_them(start_server, certs,
                                                                    curl_bin):
    server = start_server(mtls_config(certs, False), env={"FG_TEST_ADMIN": "s3cret-token"})
    base = f"https://127.0.0.1:{server.http_port}"
    ca = ["--cacert", str(certs / "ca.pem")]
    as_ops = [*ca, "--cert", str(certs / "client.pem"), "--key", str(certs / "client.key")]

    def curl(*args):
        out = subprocess.run([curl_bin, "-s", "-o", "/dev/stderr", "-w", "%{http_code}", *args],
                             capture_output=True, text=True, timeout=10)
        return out.returncode, out.stdout, out.stderr

    # The listed certificate: an admin with no token.
    rc, code, body = curl(*as_ops, "-X", "PUT", "-H", "Content-Type: application/json",
                          "-d", '{"ttl_ms":60000,"rule":"api","reason":"mtls test"}',
                          f"{base}/v1/admin/blocks/intruder")
    assert (rc, code) == (0, "200"), body
    rc, code, body = curl(*as_ops, f"{base}/v1/admin/log")
    assert code == "200", body
    entry = [e for e in json.loads(body)["entries"] if e["target"].endswith("intruder")][-1]
    assert entry["who"] == "client_cert" and entry["client"] == "ops.example.com", entry
    assert "who=client_cert:ops.example.com" in server.stderr_text()
    # No certificate (asked, not required): served, but not an admin.
    rc, code, body = curl(*ca, f"{base}/v1/admin/log")
    assert code == "401", body
    rc, code, body = curl(*ca, "-X", "POST", "-d", '{"rule":"api","key":"k"}', f"{base}/v1/check")
    assert code == "200", body
    # The same name from a CA not trusted: the handshake is refused.
    rc, code, body = curl(*ca, "--cert", str(certs / "stranger.pem"), "--key",
                          str(certs / "stranger.key"), f"{base}/v1/admin/log")
    assert rc != 0 and code == "000", (rc, code, body)
    # RESP: an admin command with no AUTH, from the listed certificate only.
    cli = require_tool("redis-cli", "redis-tools")
    resp = [cli, "--tls", "--cacert", str(certs / "ca.pem"), "-p", str(server.resp_port)]
    out = subprocess.run([*resp, "--cert", str(certs / "client.pem"), "--key",
                          str(certs / "client.key"), "FG.BLOCK", "other", "60000"],
                         capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "OK", out
    out = subprocess.run([*resp, "FG.BLOCK", "third", "60000"], capture_output=True,
                         text=True, timeout=10)
    assert "NOPERM" in out.stdout, out
    metrics = subprocess.run([curl_bin, "-s", *as_ops, f"{base}/metrics"], capture_output=True,
                             text=True, timeout=10).stdout
    assert metric_value(metrics, "floodgate_tls_handshake_failures_total",
                        {"protocol": "http"}) >= 1, metrics


def test_require_client_cert_refuses_clients_without_one(start_server, certs, curl_bin):
    server = start_server(mtls_config(certs, True), env={"FG_TEST_ADMIN": "s3cret-token"})
    base = f"https://127.0.0.1:{server.http_port}/healthz"
    ca = ["--cacert", str(certs / "ca.pem")]
    out = subprocess.run([curl_bin, "-s", *ca, base], capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and "ok" not in out.stdout, out
    out = subprocess.run([curl_bin, "-s", *ca, "--cert", str(certs / "client.pem"), "--key",
                          str(certs / "client.key"), base], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0 and '"ok"' in out.stdout, out


def test_grpc_with_required_client_certificates(start_server, certs, tmp_dir, node_ready):
    envoy = tmp_dir / "envoy"
    envoy.mkdir()
    (envoy / "tls.yaml").write_text(ENVOY_DOMAIN)
    text = (f"tls: {{ cert_file: {certs / 'server.pem'}, key_file: {certs / 'server.key'}, "
            f"client_ca_file: {certs / 'ca.pem'}, require_client_cert: true }}\n"
            "listen_tls: { grpc: true }\n"
            f"envoy_ratelimit: {{ files: [{envoy}] }}\n")
    server = start_server(text, grpc="127.0.0.1:0")
    trusting = {"FG_GRPC_CA": str(certs / "ca.pem")}
    # No client certificate, or one another CA signed: no call is made.
    rc, _, err = grpc_call(node_ready, server.grpc_port, trusting)
    assert rc == 1 and "UNAVAILABLE" in err, err
    rc, _, err = grpc_call(node_ready, server.grpc_port,
                           {**trusting, "FG_GRPC_CERT": str(certs / "stranger.pem"),
                            "FG_GRPC_KEY": str(certs / "stranger.key")})
    assert rc == 1 and "UNAVAILABLE" in err, err
    rc, out, err = grpc_call(node_ready, server.grpc_port,
                             {**trusting, "FG_GRPC_CERT": str(certs / "client.pem"),
                              "FG_GRPC_KEY": str(certs / "client.key")})
    assert rc == 0 and json.loads(out)["overall_code"] == "OK", err


def test_redis_cli_auth_and_an_admin_command_over_tls(start_server, certs):
    text = (f"tls: {{ cert_file: {certs / 'server.pem'}, key_file: {certs / 'server.key'} }}\n"
            "listen_tls: { resp: true }\n"
            "server: { auth_token_env: FG_TEST_DATA }\n"
            "admin: { token_env: FG_TEST_ADMIN }\n"
            "rules:\n  api: { algorithm: fixed_window, limits: [5/minute] }\n")
    server = start_server(text, env={"FG_TEST_DATA": "data-token", "FG_TEST_ADMIN": "admin-token"})
    cli = require_tool("redis-cli", "redis-tools")
    resp = [cli, "--tls", "--cacert", str(certs / "ca.pem"), "-p", str(server.resp_port)]

    def run(*args):
        return subprocess.run([*resp, *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()

    assert "NOAUTH" in run("FG.CHECK", "api", "k")
    assert run("-a", "data-token", "--no-auth-warning", "FG.CHECK", "api", "k").split()[:2] == [
        "1", "5"]
    # The admin token over TLS: the admin commands (from loopback it would
    # be allowed in clear too; over TLS it is allowed from anywhere).
    assert run("-a", "admin-token", "--no-auth-warning", "FG.BLOCK", "k", "60000") == "OK"
    assert run("-a", "data-token", "--no-auth-warning", "FG.CHECK", "api", "k").split()[0] == "0"
