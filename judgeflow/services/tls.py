"""A throwaway certificate authority and broker certificate for the local secured broker.

Made with the `cryptography` package rather than keytool: no JVM start per step, and the
same code makes the untrusted and expired certificates the refusal tests need. The broker
reads PEM files directly (`ssl.keystore.type=PEM`, KIP-651), clients read the CA's PEM.
The broker certificate names both `localhost` and `127.0.0.1`: aiokafka always checks the
host name (aiokafka #855), and the local broker advertises `127.0.0.1`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from judgeflow.services.process import write_private

__all__ = ["Authority", "new_authority", "server_pem", "write_private"]

HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate (what clients trust) and its key (what signs the broker's)."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_authority(common_name: str = "judgeflow local CA", days: int = 30) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
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
        .sign(key, hashes.SHA256())
    )
    return Authority(cert, key)


def server_pem(
    ca: Authority,
    hosts: tuple[str, ...] = HOSTS,
    *,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
) -> bytes:
    """The broker's keystore as one PEM: its unencrypted PKCS#8 key, its certificate, the CA's.

    `not_before` / `not_after` default to a certificate valid from now for 30 days; the
    refusal tests pass dates in the past to make an expired one."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - dt.timedelta(minutes=5))
        .not_valid_after(not_after or now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem + cert.public_bytes(serialization.Encoding.PEM) + ca.pem
