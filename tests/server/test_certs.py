"""`vgate certs`: a CA, a server certificate with the Service's names, a private key only we read."""

from __future__ import annotations

import base64
import ipaddress
import subprocess

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from helpers import VGATE


def test_certs_command_writes_ca_and_server_cert_and_prints_ca_bundle(tmp_path):
    out = tmp_path / "certs"
    result = subprocess.run([*VGATE, "certs", "--out", str(out), "--service", "vgate", "--namespace", "vgate-system",
                             "--days", "30"], capture_output=True, text=True, check=True)
    ca_pem = (out / "ca.crt").read_bytes()
    assert base64.b64decode(result.stdout.strip()) == ca_pem
    assert (out / "tls.key").stat().st_mode & 0o777 == 0o600
    ca = x509.load_pem_x509_certificate(ca_pem)
    server = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    server.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ExtendedKeyUsageOID.SERVER_AUTH in server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        "vgate", "vgate.vgate-system", "vgate.vgate-system.svc", "vgate.vgate-system.svc.cluster.local", "localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    lifetime = server.not_valid_after_utc - server.not_valid_before_utc
    assert 30 <= lifetime.days <= 31
    assert not list(out.glob("*ca*.key")), "the CA key must not be written"


def test_serve_generates_development_certs_when_none_exist(start_server):
    server = start_server(workers=1, make_certs=False)  # ready only if TLS verifies against the new CA
    assert "generated development certificates" in server.output()
    assert (server.workdir / "certs" / "tls.key").stat().st_mode & 0o777 == 0o600
