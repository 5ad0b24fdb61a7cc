"""TLS on the RESP and HTTP listeners, with real clients: curl --cacert
(HTTPS; a wrong CA refused), redis-cli --tls (FG.CHECK), Python's ssl
module (the certificate's serial across a SIGHUP reload), plaintext sent to
a TLS port refused; and the config's mistakes stopped at check-config and
at start with the file named."""

import signal
import socket
import ssl
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool, until

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(*args, cwd: Path) -> str:
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def make_certs(d: Path) -> None:
    """A CA, two server certificates it signs (server, next), and another
    CA nobody trusts."""
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


def peer_serial(port: int, ca: Path) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
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
