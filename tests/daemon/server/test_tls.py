"""TLS: server certificates, client certificates, and the clients' TLS and token options."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from daemon.server.auth import token_hash
from stratad_client import AsyncMemoryClient, MemoryClient, StrataClientError
from tests.support.daemons import weaverctl


def _key_and_name(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Name]:
    return ec.generate_private_key(ec.SECP256R1()), x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, name)]
    )


def _write(d: Path, name: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    (d / f"{name}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (d / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _certificate(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    extensions: list[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA made now, a server certificate for 127.0.0.1 and localhost, a client certificate,
    and a second CA that signed nothing the daemon trusts."""
    d = tmp_path_factory.mktemp("pki")
    cas = {}
    for ca in ("ca", "other-ca"):
        key, name = _key_and_name(ca)
        ca_ext = [(x509.BasicConstraints(ca=True, path_length=None), True)]
        _write(d, ca, key, _certificate(name, key, name, key, ca_ext))
        cas[ca] = (key, name)
    server_ext: list[tuple[x509.ExtensionType, bool]] = [
        (
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            False,
        )
    ]
    client_ext: list[tuple[x509.ExtensionType, bool]] = [
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
    ]
    for leaf, ca, ext in (
        ("server", "ca", server_ext),
        ("client", "ca", client_ext),
        ("stranger", "other-ca", client_ext),
    ):
        key, name = _key_and_name(leaf)
        ca_key, ca_name = cas[ca]
        _write(d, leaf, key, _certificate(name, key, ca_name, ca_key, ext))
    return d


def _fails(client: MemoryClient) -> grpc.StatusCode:
    with pytest.raises(StrataClientError) as err:
        client.append("s", "hello", user_id="alice", timeout=5)
    return err.value.code


def test_tls_server_and_a_client_that_trusts_its_ca(start_daemon, pki):
    daemon = start_daemon(tls={"cert_file": pki / "server.pem", "key_file": pki / "server.key"})
    with MemoryClient(daemon.address, ca_file=pki / "ca.pem") as c:
        assert c.append("s", "over TLS", user_id="alice").seq == 1
        assert c.health() in ("SERVING", "NOT_SERVING")
    with MemoryClient(daemon.address) as plain:  # plaintext to a TLS port
        assert _fails(plain) == grpc.StatusCode.UNAVAILABLE
    with MemoryClient(daemon.address, ca_file=pki / "other-ca.pem") as wrong:  # untrusted
        assert _fails(wrong) == grpc.StatusCode.UNAVAILABLE
    with MemoryClient(
        f"localhost:{daemon.address.rpartition(':')[2]}", ca_file=pki / "ca.pem"
    ) as c:
        assert c.get_working_memory("s").messages[0].message.content == "over TLS"


def test_client_certificates_are_required_with_a_client_ca(start_daemon, pki, monkeypatch):
    token = "tok-tls-ops"
    daemon = start_daemon(
        tls={
            "cert_file": pki / "server.pem",
            "key_file": pki / "server.key",
            "client_ca_file": pki / "ca.pem",
        },
        auth={
            "tokens": [
                {"name": "ops", "sha256": token_hash(token), "tenants": ["*"], "rights": ["admin"]}
            ]
        },
    )
    with MemoryClient(daemon.address, ca_file=pki / "ca.pem", token=token) as no_cert:
        assert _fails(no_cert) == grpc.StatusCode.UNAVAILABLE
    stranger = {"cert_file": pki / "stranger.pem", "key_file": pki / "stranger.key"}
    with MemoryClient(daemon.address, ca_file=pki / "ca.pem", token=token, **stranger) as c:
        assert _fails(c) == grpc.StatusCode.UNAVAILABLE
    mine = {"cert_file": pki / "client.pem", "key_file": pki / "client.key"}
    with MemoryClient(daemon.address, ca_file=pki / "ca.pem", **mine) as no_token:
        assert _fails(no_token) == grpc.StatusCode.UNAUTHENTICATED  # TLS alone is not enough
    with MemoryClient(daemon.address, ca_file=pki / "ca.pem", token=token, **mine) as c:
        assert c.append("s", "mutual TLS", user_id="alice").seq == 1
        assert c.admin.stats().working_memory.live_sessions == 1

    # The same from the environment, for the asyncio client and for weaverctl.
    env = {
        "STRATA_TOKEN": token,
        "STRATA_TLS_CA": str(pki / "ca.pem"),
        "STRATA_TLS_CERT": str(pki / "client.pem"),
        "STRATA_TLS_KEY": str(pki / "client.key"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    async def aio() -> int:
        async with AsyncMemoryClient(daemon.address) as a:
            await a.append("s", "from asyncio")
            window = await a.get_working_memory("s")
            return len(window.messages)

    assert asyncio.run(aio()) == 2
    out = weaverctl(daemon.address, "--json", "stats", env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"liveSessions": "1"' in out.stdout


def test_tls_settings_must_be_complete(make_settings, pki, tmp_path):
    with pytest.raises(ValueError, match="go together"):
        make_settings(tls={"cert_file": pki / "server.pem"})
    with pytest.raises(ValueError, match=r"needs tls\.cert_file"):
        make_settings(tls={"client_ca_file": pki / "ca.pem"})
    with pytest.raises(ValueError, match="not a readable file"):
        make_settings(tls={"cert_file": tmp_path / "nope.pem", "key_file": pki / "server.key"})
