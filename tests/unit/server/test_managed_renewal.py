"""Which CA signs a renewed serving certificate (`vgate serve --tls-secret`), at a given moment.

The whole keeper, through the real API server, is tests/e2e/test_managed_certificates.py; here the rule
alone, at instants that test cannot choose: a certificate due before any CA has been in the webhook
configurations for ``ca_settle``.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from webhook.server.certs import new_ca, sign_serving
from webhook.server.managed_certs import ManagedCertificate, ManagedSettings, _Material

SECOND = datetime.timedelta(seconds=1)
# the e2e test's lifetimes: a certificate of 40 s renewed 25 s before it expires; a CA signs after 30 s
SETTINGS = ManagedSettings("vgate-system/vgate-tls", "vgate", validity=40 * SECOND, renew_before=25 * SECOND,
                           ca_validity=150 * SECOND, ca_renew_before=100 * SECOND, ca_settle=30 * SECOND)


def keeper(tmp_path: Path) -> ManagedCertificate:
    def no_api_server() -> object:
        raise AssertionError("renewing decides without the API server")

    return ManagedCertificate(SETTINGS, no_api_server, tmp_path)  # type: ignore[arg-type]


def ca_made(ago: datetime.timedelta, now: datetime.datetime) -> tuple:
    return new_ca(f"vgate CA made {ago.total_seconds():g}s ago", now - ago, 150 / 86400)


@pytest.mark.parametrize("first_age,newer_age,signer", [(20, 5, "first"), (40, 5, "first"), (90, 35, "newer")])
def test_a_due_certificate_is_renewed_by_a_trusted_ca_even_before_any_has_settled(tmp_path, first_age, newer_age,
                                                                                  signer):
    """20 s after a fresh install, the first certificate (20 s left) is due and no CA has settled: the
    CA that signed it, already trusted, signs the next (it used to wait for the CA to settle, and
    the first certificate expired while served). Once CAs have settled, the newest of them signs."""
    now = datetime.datetime.now(datetime.timezone.utc)
    first = ca_made(first_age * SECOND, now)
    newer = ca_made(newer_age * SECOND, now)
    cert, key = sign_serving(*first, "vgate.vgate-system.svc", SETTINGS.names, now + 20 * SECOND)
    material = _Material([newer, first], cert, key)
    assert keeper(tmp_path)._renew(material, now)
    assert material.cert is not None and material.cert != cert
    assert material.signer_of(material.cert) is {"first": first[0], "newer": newer[0]}[signer]
    assert material.cert.not_valid_after_utc >= (now + 40 * SECOND).replace(microsecond=0)


def test_a_certificate_not_yet_due_is_kept(tmp_path):
    now = datetime.datetime.now(datetime.timezone.utc)
    first = ca_made(20 * SECOND, now)
    cert, key = sign_serving(*first, "vgate.vgate-system.svc", SETTINGS.names, now + 30 * SECOND)
    material = _Material([first], cert, key)
    assert not keeper(tmp_path)._renew(material, now) and material.cert is cert


def test_a_fresh_install_signs_with_its_new_ca_at_once(tmp_path):
    now = datetime.datetime.now(datetime.timezone.utc)
    material = _Material([], None, None)
    assert keeper(tmp_path)._renew(material, now)
    assert len(material.cas) == 1 and material.cert is not None
    assert material.signer_of(material.cert) is material.cas[0][0]
