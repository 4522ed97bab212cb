"""The control plane's certificates: one CA, serving pairs with loopback SANs, client identities.

Each component gets its own client certificate whose subject is the identity RBAC knows it by
(``system:kube-controller-manager``, ``system:serviceaccount:volcano-system:volcano-scheduler``,
...), so the RBAC objects the charts ship are really exercised instead of every process running
as cluster admin.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAYS = 30


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class Authority:
    """A CA kept in ``directory`` (ca.crt, ca.key), created on first use."""

    def __init__(self, directory: Path, common_name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.cert_path, self.key_path = directory / "ca.crt", directory / "ca.key"
        if not self.cert_path.exists():
            key = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
            now = datetime.datetime.now(datetime.timezone.utc)
            cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                    .public_key(key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - datetime.timedelta(minutes=5))
                    .not_valid_after(now + datetime.timedelta(days=DAYS))
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                    .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                 content_commitment=False, key_encipherment=False,
                                                 data_encipherment=False, key_agreement=False,
                                                 encipher_only=False, decipher_only=False), critical=True)
                    .sign(key, hashes.SHA256()))
            self.key_path.write_bytes(_key_pem(key))
            self.key_path.chmod(0o600)
            self.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
        loaded = serialization.load_pem_private_key(self.key_path.read_bytes(), None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey)
        self.key: ec.EllipticCurvePrivateKey = loaded

    def issue(self, directory: Path, name: str, common_name: str, *, organizations: tuple[str, ...] = (),
              hosts: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """Writes ``<name>.crt``/``<name>.key``: a serving pair when ``hosts`` is given, else a client one."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                             *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations)])
        now = datetime.datetime.now(datetime.timezone.utc)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=DAYS))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]),
                                            critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        key_path.write_bytes(_key_pem(key))
        key_path.chmod(0o600)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert_path, key_path


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def signing_key_pair(directory: Path) -> tuple[Path, Path]:
    """The service-account token signing key (sa.key) and its public half (sa.pub)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = directory / "sa.key", directory / "sa.pub"
    private.write_bytes(_key_pem(key))
    private.chmod(0o600)
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public
