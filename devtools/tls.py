"""Throwaway certificates for local TLS: a CA, a server certificate, client certificates (PEM files).

`floe dev kafka --secured` and the secured-Kafka tests use them. Keys are EC P-256, written as
unencrypted PKCS#8 (`-----BEGIN PRIVATE KEY-----`): what Kafka's PEM keystores, librdkafka and Python's
`ssl` all read. Nothing here is fit for production: the CA's key lies next to its certificate.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=30)
# A name no broker listens under: the self-signed certificate's, so host name checks fail against it.
MISMATCHED_NAME = "not-this-broker.invalid"


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM files."""

    certificate: Path
    key: Path

    def keystore_text(self) -> str:
        """Key and certificate in one PEM text: Kafka's `ssl.keystore.type=PEM` file layout."""
        return self.key.read_text() + self.certificate.read_text()


@dataclass(frozen=True)
class DevCertificates:
    """The certificates of a secured local broker, all under `directory`.

    `server` is signed by `ca` for 127.0.0.1 and localhost; `self_signed_server` signs itself, for a
    name no client connects to. `client` is signed by `ca`; `expired_client` too but no longer valid;
    `untrusted_client` is signed by `untrusted_ca`, which the broker does not trust."""

    directory: Path
    ca: KeyPair
    server: KeyPair
    self_signed_server: KeyPair
    client: KeyPair
    expired_client: KeyPair
    untrusted_ca: KeyPair
    untrusted_client: KeyPair

    @property
    def ca_certificate(self) -> Path:
        return self.ca.certificate


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "floe development"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write(directory: Path, stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> KeyPair:
    pair = KeyPair(directory / f"{stem}.pem", directory / f"{stem}.key")
    pair.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pair.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    pair.key.chmod(0o600)
    return pair


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    names: tuple[str, ...] = (),
    usage: x509.ObjectIdentifier | None = None,
    not_before: dt.datetime,
    not_after: dt.datetime,
) -> x509.Certificate:
    issuer_name, issuer_key = issuer or (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if names:
        entries: list[x509.GeneralName] = []
        for name in names:
            try:
                entries.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                entries.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(entries), critical=False)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def generate_certificates(directory: Path, now: dt.datetime | None = None) -> DevCertificates:
    """Write a fresh CA, server and client certificates (PEM) into `directory` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = now or dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(hours=1), now + VALIDITY

    def authority(stem: str, subject: str) -> tuple[KeyPair, x509.Name, ec.EllipticCurvePrivateKey]:
        key = _key()
        cert = _certificate(subject, key, None, ca=True, not_before=start, not_after=end)
        return _write(directory, stem, key, cert), cert.subject, key

    def leaf(
        stem: str,
        subject: str,
        issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
        usage: x509.ObjectIdentifier,
        names: tuple[str, ...] = (),
        not_before: dt.datetime = start,
        not_after: dt.datetime = end,
    ) -> KeyPair:
        key = _key()
        cert = _certificate(
            subject, key, issuer, names=names, usage=usage, not_before=not_before, not_after=not_after
        )
        return _write(directory, stem, key, cert)

    ca, ca_name, ca_key = authority("ca", "floe development CA")
    untrusted_ca, untrusted_name, untrusted_key = authority("untrusted-ca", "floe untrusted CA")
    server_usage, client_usage = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    return DevCertificates(
        directory=directory,
        ca=ca,
        server=leaf("server", "localhost", (ca_name, ca_key), server_usage, ("127.0.0.1", "localhost")),
        self_signed_server=leaf(
            "self-signed-server", MISMATCHED_NAME, None, server_usage, (MISMATCHED_NAME,)
        ),
        client=leaf("client", "floe-client", (ca_name, ca_key), client_usage),
        expired_client=leaf(
            "expired-client",
            "floe-expired-client",
            (ca_name, ca_key),
            client_usage,
            not_before=now - dt.timedelta(days=10),
            not_after=now - dt.timedelta(days=1),
        ),
        untrusted_ca=untrusted_ca,
        untrusted_client=leaf(
            "untrusted-client", "floe-untrusted-client", (untrusted_name, untrusted_key), client_usage
        ),
    )


def certificates_in(directory: Path, now: dt.datetime | None = None) -> DevCertificates:
    """The certificates in `directory`, generated again when missing or within a day of expiring."""
    now = now or dt.datetime.now(dt.UTC)
    ca = directory / "ca.pem"
    try:
        expires = x509.load_pem_x509_certificate(ca.read_bytes()).not_valid_after_utc
    except (OSError, ValueError):
        return generate_certificates(directory, now)
    names = (
        "ca",
        "server",
        "self-signed-server",
        "client",
        "expired-client",
        "untrusted-ca",
        "untrusted-client",
    )
    if expires - now < dt.timedelta(days=1) or not all((directory / f"{n}.key").exists() for n in names):
        return generate_certificates(directory, now)
    pairs = [KeyPair(directory / f"{n}.pem", directory / f"{n}.key") for n in names]
    return DevCertificates(directory, *pairs)
