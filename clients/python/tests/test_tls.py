"""What only TLS has, against a live floodgate serving its HTTP front over
TLS with a throwaway CA (conftest's Certs): floodgate's certificate verified
by default and a wrong CA refused at once with a message that says so;
mutual TLS (require_client_cert) refusing a client without a certificate
its CA signed; TLS options refused with an http:// URL, and bad files when
the client is made; a kept-alive TLS connection floodgate closed, replaced.
The tests taking `transport` elsewhere run over TLS too."""

from __future__ import annotations

import asyncio
import ssl
import time

import pytest

from floodgate_client import AsyncClient, Client, UnavailableError

from conftest import CONFIG, Floodgate


def refusals(url: str, **tls) -> list:
    """The UnavailableError that a Client and an AsyncClient each raise at
    their first check, with the seconds each took."""
    out = []
    start = time.monotonic()
    with Client(url, **tls) as c:
        with pytest.raises(UnavailableError) as e:
            c.check("five", "refused")
    out.append((e.value, time.monotonic() - start))

    async def main() -> None:
        async with AsyncClient(url, **tls) as c:
            await c.check("five", "refused")

    start = time.monotonic()
    with pytest.raises(UnavailableError) as e:
        asyncio.run(main())
    out.append((e.value, time.monotonic() - start))
    return out


def five_then_denied(url: str, key: str, **tls) -> None:
    """Five admitted, then one denied, by a Client and by an AsyncClient:
    the connection carried real decisions."""
    with Client(url, **tls) as c:
        assert [c.check("five", key + "s").remaining for _ in range(5)] == [4, 3, 2, 1, 0]
        d = c.check("five", key + "s")
        assert (d.allowed, d.status) == (False, 429) and d.retry_after_ms > 55000

    async def main() -> list:
        async with AsyncClient(url, **tls) as c:
            return [await c.check("five", key + "a") for _ in range(6)]

    decisions = asyncio.run(main())
    assert [d.allowed for d in decisions] == [True] * 5 + [False]
    assert [d.remaining for d in decisions[:5]] == [4, 3, 2, 1, 0]


@pytest.fixture(scope="module")
def mtls_floodgate(certs):
    """floodgate over TLS with require_client_cert."""
    server = Floodgate(CONFIG, certs, require_client_cert=True)
    yield server
    server.stop()


def test_a_wrong_ca_is_refused_at_once_saying_so(tls_floodgate, certs):
    # {}: the system's CAs, which know nothing of the test CA.
    for tls in ({"ca_file": certs.other_ca}, {}):
        for error, took in refusals(tls_floodgate.url, **tls):
            assert str(error).startswith(
                f"floodgate at {tls_floodgate.url}: TLS handshake failed: floodgate's "
                "certificate was not accepted: "), error
            assert "is ca_file the CA that signed it" in str(error)
            assert isinstance(error.__cause__, ssl.SSLCertVerificationError)
            assert took < 1.0


def test_the_test_ca_by_ca_file_or_ssl_context_and_the_name_localhost(tls_floodgate, certs, key):
    five_then_denied(tls_floodgate.url, key + "f", ca_file=certs.ca)
    five_then_denied(tls_floodgate.url, key + "c",
                     ssl_context=ssl.create_default_context(cafile=certs.ca))
    # The certificate names 127.0.0.1 and localhost; either is verified.
    with Client(f"https://localhost:{tls_floodgate.port}", ca_file=certs.ca) as c:
        assert c.check("five", key + "l").remaining == 4


def test_require_client_cert_refuses_none_and_another_cas_and_serves_its_own(mtls_floodgate,
                                                                            certs, key):
    without = refusals(mtls_floodgate.url, ca_file=certs.ca)
    rogue = refusals(mtls_floodgate.url, ca_file=certs.ca, cert_file=certs.rogue_cert,
                     key_file=certs.rogue_key)
    for error, took in without + rogue:
        # The alert, or when a reset overtook it, the close before any answer.
        assert "does it require a client certificate (cert_file, key_file)" in str(error), error
        assert took < 1.0
    five_then_denied(mtls_floodgate.url, key, ca_file=certs.ca, cert_file=certs.cert,
                     key_file=certs.key)


def test_tls_on_a_plaintext_port_is_told_so_and_clear_on_a_tls_port_refused(floodgate,
                                                                             tls_floodgate, certs):
    for error, took in refusals(f"https://127.0.0.1:{floodgate.port}", ca_file=certs.ca):
        assert "TLS handshake failed (WRONG_VERSION_NUMBER): the port does not speak TLS" \
            in str(error)
    for error, took in refusals(f"http://127.0.0.1:{tls_floodgate.port}"):
        assert "closed the connection" in str(error)
        assert took < 1.0


def test_tls_options_need_https_and_readable_files(certs, tmp_path):
    for cls in (Client, AsyncClient):
        with pytest.raises(ValueError, match=r"ca_file given for the plaintext URL "
                                             r"'http://127\.0\.0\.1:1': use https://"):
            cls("http://127.0.0.1:1", ca_file=certs.ca)
        missing = str(tmp_path / "missing.pem")
        with pytest.raises(ValueError, match=f"cannot load ca_file '{missing}': No such file"):
            cls("https://127.0.0.1:1", ca_file=missing)
    with pytest.raises(ValueError, match="cannot load ca_file '.*client.key'"):
        Client("https://127.0.0.1:1", ca_file=certs.key)  # a key, no certificate
    with pytest.raises(ValueError, match="cannot load cert_file '.*client.pem' with key_file "
                                         "'.*rogue.key': KEY_VALUES_MISMATCH"):
        Client("https://127.0.0.1:1", cert_file=certs.cert, key_file=certs.rogue_key)
    with pytest.raises(ValueError, match="key_file without cert_file"):
        Client("https://127.0.0.1:1", key_file=certs.key)
    with pytest.raises(ValueError, match="ssl_context or ca_file"):
        Client("https://127.0.0.1:1", ca_file=certs.ca, ssl_context=ssl.create_default_context())


def test_a_kept_alive_tls_connection_floodgate_closed_is_replaced(certs, key):
    # Counted once: the check goes again on a new connection only when
    # floodgate read nothing of it.
    server = Floodgate("server: { http_idle_timeout: 300ms }\n" + CONFIG, certs)
    try:
        async def main() -> list:
            async with AsyncClient(server.url, ca_file=certs.ca) as ac:
                with Client(server.url, ca_file=certs.ca) as c:
                    out = [c.check("five", key).remaining, (await ac.check("five", key)).remaining]
                    await asyncio.sleep(0.6)
                    out += [c.check("five", key).remaining, (await ac.check("five", key)).remaining]
                    return out

        assert asyncio.run(main()) == [4, 3, 2, 1]
        assert any("reason=idle_timeout" in line for line in server.lines)
    finally:
        server.stop()
