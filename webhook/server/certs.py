"""TLS material for the webhook: a CA kept apart, the serving certificate it signs, and pair checks.

The API server only needs the CA (the ``caBundle`` of the webhook configurations); the server only
needs its own certificate and key. ``vgate certs`` keeps the CA in a directory of its own (its key
0600, never beside the serving pair that goes into the cluster's Secret) and signs each new
serving certificate with it, so renewing changes nothing the API server holds. Without a CA
directory (development certificates of ``vgate serve``) the CA key is used once and not written.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..core.errors import CertificateError

CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE = "ca.crt", "ca.key", "tls.crt", "tls.key"
BACKDATE = datetime.timedelta(minutes=5)  # certificates are valid from this long before they are made: clocks differ


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
                client: bool = False, ca_dir: str | Path | None = None) -> CertPaths:
    """Write ca.crt, tls.crt and tls.key (0600) under ``directory``; return their paths.

    ``ca_dir``: the CA's own directory. Its ca.crt and ca.key (0600) sign the new certificate when
    they exist, and are created there when they do not; without it the CA key is not kept.
    ``client``: the certificate is one a client presents (extended key usage clientAuth), as the
    API server does to a webhook that requires mutual TLS (``server.clientCA``).
    """
    paths = CertPaths.under(directory)
    paths.ca.parent.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_cert, ca_key = load_ca(Path(ca_dir)) if ca_dir and (Path(ca_dir) / CA_KEY_FILE).is_file() else (None, None)
    if ca_cert is None or ca_key is None:
        ca_cert, ca_key = new_ca(f"vgate CA for {service}.{namespace}", now, max(days, 3650 if ca_dir else days))
        if ca_dir:
            Path(ca_dir).mkdir(parents=True, exist_ok=True)
            write_atomically(Path(ca_dir) / CA_FILE, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
            write_atomically(Path(ca_dir) / CA_KEY_FILE, private_pem(ca_key), 0o600)
    server_cert, server_key = sign_serving(ca_cert, ca_key, f"{service}.{namespace}.svc",
                                           [*service_names(service, namespace), "127.0.0.1"],
                                           min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc),
                                           client=client)
    write_atomically(paths.ca, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    write_atomically(paths.cert, server_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    write_atomically(paths.key, private_pem(server_key), 0o600)
    return paths


def sign_serving(ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, common_name: str,
                 hosts: list[str], not_after: datetime.datetime, *, client: bool = False,
                 ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A new key (P-256) and its certificate for ``hosts`` (DNS names, or IP addresses as written),
    signed by the CA, valid from ``BACKDATE`` ago until ``not_after``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                              else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_general_name(host) for host in dict.fromkeys(hosts)]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _general_name(host: str) -> x509.GeneralName:
    """An IP address SAN for an address, a DNS name SAN for anything else."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def new_ca(common_name: str, now: datetime.datetime,
           days: float) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA (P-256) valid for ``days`` from ``now``: vgate's own, and the e2e control plane's."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def load_ca(ca_dir: Path) -> tuple[x509.Certificate | None, ec.EllipticCurvePrivateKey | None]:
    """The CA kept in ``ca_dir`` (ca.crt, ca.key); (None, None) if its key is not a P-256 one."""
    try:
        cert = x509.load_pem_x509_certificate((ca_dir / CA_FILE).read_bytes())
    except (OSError, ValueError) as error:
        raise CertificateError(str(ca_dir / CA_FILE), None, f"not the kept CA's certificate in PEM ({_why(error)})") \
            from None
    try:
        key = serialization.load_pem_private_key((ca_dir / CA_KEY_FILE).read_bytes(), password=None)
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise CertificateError(str(ca_dir / CA_KEY_FILE), None, f"not the kept CA's key in PEM ({_why(error)})") \
            from None
    return (cert, key) if isinstance(key, ec.EllipticCurvePrivateKey) else (None, None)


def _why(error: Exception) -> str:
    """An error in one short phrase (cryptography's own end with a link to its FAQ)."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return str(error).split(". See https://", 1)[0]


def private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def is_matching_pair(cert_pem: bytes, key_pem: bytes) -> bool:
    """Whether ``key_pem`` is the private key of the certificate ``cert_pem`` (both parse)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except ValueError:
        return False
    return same_public_key(cert, key)


def same_public_key(cert: x509.Certificate, key: Any) -> bool:
    """Whether the private ``key`` is the one whose public half ``cert`` carries."""
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return bool(cert.public_key().public_bytes(*raw) == key.public_key().public_bytes(*raw))


def expires_at(cert_pem: bytes) -> datetime.datetime:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def ca_bundle(paths: CertPaths) -> str:
    """The base64 ``caBundle`` value for the webhook configurations."""
    return base64.b64encode(paths.ca.read_bytes()).decode("ascii")


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    """Write atomically with ``mode`` from the start, so a key is never readable by others."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(temporary, mode)
    os.replace(temporary, path)
