"""Kubernetes resource quantities ("512Mi", "1.5", "100m", "1e3") as exact Decimals.

Needed to compare a burstable memory limit with its request: never inject a limit below the
request, which the API server would reject. Exact decimal arithmetic, as resource.Quantity does.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$")


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity; raise ValueError (with the value) on anything Kubernetes would reject."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as exc:
        raise ValueError(f"not a quantity: {value!r}") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return base * (Decimal(10) ** int(suffix[1:]))
    return base * _DECIMAL[suffix]
