"""TLS material for the webhook: a throw-away CA and the server certificate it signs.

The API server only needs the CA (the ``caBundle`` of the webhook configurations), and the
server only needs its own certificate and key. The CA key is used once and never written, so
no file on disk can mint further certificates; re-running ``vgate certs`` rotates both.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"


@dataclass(frozen=True)
class CertPaths:
    ca: Path
    cert: Path
    key: Path

    @classmethod
    def under(cls, directory: str | Path) -> "CertPaths":
        directory = Path(directory)
        return cls(directory / CA_FILE, directory / CERT_FILE, directory / KEY_FILE)

    def exist(self) -> bool:
        return self.ca.is_file() and self.cert.is_file() and self.key.is_file()


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may use to reach the Service, plus local development names."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local", "localhost"]


def write_certs(directory: str | Path, service: str, namespace: str, days: int = 365, *,
                client: bool = False) -> CertPaths:
    """Write ca.crt, tls.crt and tls.key (0600) under ``directory``; return their paths.

    ``client``: the certificate is one a client presents (extended key usage clientAuth), as the
    API server does to a webhook that requires mutual TLS (``server.clientCA``).
    """
    paths = CertPaths.under(directory)
    paths.ca.parent.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"vgate CA for {service}.{namespace}")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    names = service_names(service, namespace)
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}.{namespace}.svc")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                              else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write(paths.ca, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(paths.cert, server_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(paths.key, server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()), 0o600)
    return paths


def ca_bundle(paths: CertPaths) -> str:
    """The base64 ``caBundle`` value for the webhook configurations."""
    return base64.b64encode(paths.ca.read_bytes()).decode("ascii")


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write atomically with ``mode`` from the start, so a key is never readable by others."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(temporary, mode)
    os.replace(temporary, path)
