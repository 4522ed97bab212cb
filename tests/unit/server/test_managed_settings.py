"""`vgate serve --tls-secret`'s settings: durations as cert-manager writes them, and lifetimes that could
not renew in time refused before anything starts (the certificate itself: tests/e2e/test_managed_certificates.py)."""

from __future__ import annotations

import datetime

import pytest
from click.testing import CliRunner

from webhook.cli import main
from webhook.server.managed_certs import ManagedSettings, parse_duration


@pytest.mark.parametrize("text,seconds", [("2160h", 2160 * 3600), ("90m", 5400), ("1h30m", 5400), ("45s", 45),
                                          ("0.5h", 1800)])
def test_durations_read_as_cert_manager_writes_them(text, seconds):
    assert parse_duration(text) == datetime.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "3d", "h", "10", "10h junk", "-5m"])
def test_other_durations_are_refused(text):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_the_defaults_can_renew_and_lifetimes_that_cannot_are_named():
    assert ManagedSettings("vgate-system/vgate-tls", "vgate", inject=("mutating/vgate",)).problems() == []
    hours = datetime.timedelta(hours=1)
    bad = ManagedSettings("vgate-tls", "vgate", inject=("webhooks/vgate",), validity=hours, renew_before=2 * hours,
                          ca_validity=10 * hours, ca_renew_before=hours)
    found = " ".join(bad.problems())
    for said in ("NAMESPACE/NAME", "mutating/NAME", "--tls-renew-before must be shorter", "--ca-settle plus"):
        assert said in found


def test_serve_refuses_bad_lifetimes_in_one_line_before_starting():
    result = CliRunner().invoke(main, ["serve", "--tls-secret", "vgate-system/vgate-tls", "--tls-validity", "3d"])
    assert result.exit_code == 2 and "not a duration" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["serve", "--tls-secret", "vgate-system/vgate-tls", "--tls-renew-before", "5s",
                                       "--workers", "1", "--reload-interval", "1"])
    assert result.exit_code == 2 and "at least 16.5s" in result.output  # 2 looks, 1 s to notice, 5.5 s to replace


def test_a_renewal_must_leave_time_to_replace_every_worker():
    """Eight workers replaced in turn take 44 s (3.5 s to start each, 2 s to drain the old one): a
    certificate renewed 30 s ahead would expire while the last old worker still served it."""
    settings = ManagedSettings("vgate-system/vgate-tls", "vgate", validity=datetime.timedelta(minutes=5),
                               renew_before=datetime.timedelta(seconds=30))
    assert settings.problems(2 + 2 * 5.5) == []
    (said,) = settings.problems(2 + 8 * 5.5)
    assert "at least 56s" in said and "--workers replaced in turn" in said
    result = CliRunner().invoke(main, ["serve", "--tls-secret", "vgate-system/vgate-tls", "--tls-validity", "5m",
                                       "--tls-renew-before", "30s", "--workers", "8", "--reload-interval", "2"])
    assert result.exit_code == 2 and "at least 56s" in result.output and "Traceback" not in result.output
