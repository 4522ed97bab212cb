"""`vgate certs`: a CA, a server certificate with the Service's names, a private key only we read."""

from __future__ import annotations

import base64
import ipaddress
import re
import socket
import ssl
import subprocess

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from webhook.core.errors import CertificateError

from helpers import VGATE, eventually


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
    assert not list(out.glob("*.key")) == ["tls.key"] and not (out / "ca.key").exists(), "the CA key is kept apart"
    assert (tmp_path / "certs.ca" / "ca.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "certs.ca" / "ca.crt").read_bytes() == ca_pem


def test_serve_generates_development_certs_when_none_exist(start_server):
    server = start_server(workers=1, make_certs=False)  # ready only if TLS verifies against the new CA
    assert "generated development certificates" in server.output()
    assert (server.workdir / "certs" / "tls.key").stat().st_mode & 0o777 == 0o600


def certs(out, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*VGATE, "certs", "--out", str(out), *extra], capture_output=True, text=True, check=True)


def test_renewal_keeps_the_ca_so_the_ca_bundle_does_not_change(tmp_path):
    out = tmp_path / "certs"
    first = certs(out)
    first_cert = (out / "tls.crt").read_bytes()
    second = certs(out)
    assert second.stdout == first.stdout, "the caBundle is the same"
    assert "kept: the caBundle is unchanged" in second.stderr and "days left" in second.stderr
    renewed = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert (out / "tls.crt").read_bytes() != first_cert
    renewed.verify_directly_issued_by(x509.load_pem_x509_certificate((out / "ca.crt").read_bytes()))
    other = certs(tmp_path / "elsewhere")
    assert other.stdout != first.stdout, "another CA directory is another CA"


def test_a_pair_is_taken_only_when_the_key_is_the_certificates(tmp_path, caplog):
    from webhook.server.certs import CertPaths
    from webhook.server.serving_pair import ServingPair

    certs(tmp_path / "a")
    certs(tmp_path / "b")
    source = tmp_path / "live"
    source.mkdir()
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (source / name).write_bytes((tmp_path / "a" / name).read_bytes())
    pair = ServingPair(CertPaths.under(source), tmp_path / "runtime")
    served = pair.served.cert.read_bytes()
    assert pair.refresh() is False  # nothing changed
    (source / "tls.crt").write_bytes((tmp_path / "b" / "tls.crt").read_bytes())  # the key not yet
    assert pair.refresh() is False and pair.served.cert.read_bytes() == served
    assert "do not match (half replaced?)" in caplog.text
    (source / "tls.key").write_bytes((tmp_path / "b" / "tls.key").read_bytes())
    assert pair.refresh() is True and pair.served.cert.read_bytes() == (tmp_path / "b" / "tls.crt").read_bytes()
    assert pair.served.key.stat().st_mode & 0o777 == 0o600
    (source / "tls.key").write_bytes(b"not a key")
    with pytest.raises(CertificateError):
        ServingPair(CertPaths.under(source), tmp_path / "runtime-2")


def served_serial(server) -> int:
    context = ssl.create_default_context(cafile=str(server.ca))  # the first CA: renewals must still verify
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_the_server_picks_up_a_renewal_without_a_restart_and_ignores_a_half_replaced_pair(start_server, tmp_path):
    server = start_server(workers=2, extra_args=("--reload-interval", "0.3"))
    before = served_serial(server)
    pid = server.process.pid
    certs(server.workdir / "certs")  # renew: same CA
    every_worker = lambda: {served_serial(server) for _ in range(8)}  # noqa: E731
    # The workers are replaced one by one: wait until granian has stopped both old ones.
    assert eventually(lambda: server.output().count("Stopped old worker") >= 2), server.output()
    renewed = served_serial(server)
    assert renewed != before and every_worker() == {renewed}
    assert server.process.pid == pid and server.process.poll() is None
    assert server.session.get(server.url + "/readyz").status_code == 200
    expiry = x509.load_pem_x509_certificate((server.workdir / "certs" / "tls.crt").read_bytes()).not_valid_after_utc
    metrics = server.session.get(server.url + "/metrics").text
    shown = re.search(r"^vgate_tls_certificate_expiry_timestamp_seconds (\S+)$", metrics, re.MULTILINE)
    assert shown and abs(float(shown.group(1)) - expiry.timestamp()) < 10, "the renewed certificate's expiry"
    certs(tmp_path / "other")
    (server.workdir / "certs" / "tls.crt").write_bytes((tmp_path / "other" / "tls.crt").read_bytes())
    assert eventually(lambda: "do not match (half replaced?)" in server.output(), 10), server.output()
    assert every_worker() == {renewed}
