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

from webhook.server import certs

DAYS = 30


class Authority:
    """A CA kept in ``directory`` (ca.crt, ca.key: vgate's own CA helpers), created on first use."""

    def __init__(self, directory: Path, common_name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.cert_path, self.key_path = directory / certs.CA_FILE, directory / certs.CA_KEY_FILE
        if not self.key_path.exists():
            cert, key = certs.new_ca(common_name, datetime.datetime.now(datetime.timezone.utc), DAYS)
            certs.write_atomically(self.cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
            certs.write_atomically(self.key_path, certs.private_pem(key), 0o600)
        loaded_cert, loaded_key = certs.load_ca(directory)
        assert loaded_cert is not None and loaded_key is not None, f"not a P-256 CA: {directory}"
        self.cert: x509.Certificate = loaded_cert
        self.key: ec.EllipticCurvePrivateKey = loaded_key

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
        certs.write_atomically(key_path, certs.private_pem(key), 0o600)
        certs.write_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
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
    certs.write_atomically(private, certs.private_pem(key), 0o600)
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    certs.write_atomically(public, public_pem, 0o644)
    return private, public
