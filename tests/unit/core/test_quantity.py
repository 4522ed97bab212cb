"""Quantities in the canonical form Kubernetes serves them back in (the chain model writes it)."""

import pytest

from webhook.core.quantity import canonical_quantity


@pytest.mark.parametrize(("written", "served"), [
    ("1000m", "1"), ("0.5", "500m"), (0.5, "500m"), (1, "1"), ("2048Mi", "2Gi"), ("1000Mi", "1000Mi"),
    ("2000", "2k"), ("1500", "1500"), ("1.5Gi", "1536Mi"), ("0.5Ki", "512"), ("12E6", "12E6"), ("1.5E3", "1500"),
    ("16Gi", "16Gi"), ("7Ki", "7Ki"), ("0.1n", "1n"), ("0100", "0100"), ("0.500", "500m"),
    ("0", "0"), ("1Ei", "1Ei"), ("5E", "5E"),
])
def test_canonical_form_is_what_the_api_server_serves(written, served):
    # The same forms tests/e2e holds to kube-apiserver 1.34's own output.
    assert canonical_quantity(written) == served


def test_a_built_in_resource_list_is_rounded_up_to_milli_first():
    assert [canonical_quantity(q, round_up_to_milli=True) for q in ("0.1n", "1500u", "1.5m", "100m", "16Gi")] == [
        "1m", "2m", "2m", "100m", "16Gi"]


def test_exa_is_a_suffix_not_an_exponent():
    """"5E" is 5 * 10^18 (it was refused: "E" read as an exponent with no digits)."""
    from decimal import Decimal

    from webhook.core.quantity import parse_quantity

    assert parse_quantity("5E") == Decimal(5) * 10**18 and parse_quantity("5E3") == 5000
