"""Kubernetes resource quantities ("512Mi", "1.5", "100m", "1e3") as exact Decimals.

Needed to compare a burstable memory limit with its request: never inject a limit below the
request, which the API server would reject. Exact decimal arithmetic, as resource.Quantity does.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

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
    if _is_exponent(suffix):
        return base * (Decimal(10) ** int(suffix[1:]))
    return base * _DECIMAL[suffix]


def _is_exponent(suffix: str) -> bool:
    """"e3", "E-2": a decimal exponent; "E" alone is exa (10^18), a decimal SI suffix."""
    return len(suffix) > 1 and suffix[0] in ("e", "E")


_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def canonical_quantity(value: str | int | float, *, round_up_to_milli: bool = False) -> str:
    """The form the API server serves a quantity back in (resource.Quantity's String()).

    Kubernetes decodes every quantity of a built-in type and re-serializes it: the format follows
    the suffix family written (binary, decimal, exponent); the value is rounded up to nano; the
    number is the shortest integer mantissa: "1000m" -> "1", "0.5" -> "500m", "2048Mi" -> "2Gi".
    A binary quantity below 1Ki or with a fraction of a byte is served in decimal form. What is
    already an exact integer mantissa is served as written ("12E6", "4Gi", "100m"). Raises
    ValueError on what is not a quantity. ``round_up_to_milli``: as the API server's defaulting of
    a built-in ResourceList first does (SetDefaults_ResourceList: "1n" of anything is "1m").
    """
    amount = parse_quantity(value)
    text = value.strip() if isinstance(value, str) else str(value)
    match = _QUANTITY.match(text)
    suffix = (match.group(2) or "") if match else ""
    if round_up_to_milli and amount != (rounded := _ceil(amount, 3)):
        amount, match = rounded, None  # a changed value is serialized anew, never as written
    if match and _kept_as_written(match.group(1), suffix):
        return text
    nano = int(_ceil(amount, 9) * 1_000_000_000)
    if nano == 0:
        return "0"
    if suffix in _BINARY and abs(amount) >= 1024 and nano % 1_000_000_000 == 0:
        units, power = nano // 1_000_000_000, 0
        while power < 6 and units % 1024 == 0:
            units, power = units // 1024, power + 1
        return f"{units}{_BINARY_SUFFIXES[power]}"
    mantissa, exponent = nano, -9
    exponent_form = _is_exponent(suffix)
    while mantissa % 1000 == 0 and (exponent_form or exponent < 18):
        mantissa, exponent = mantissa // 1000, exponent + 3
    if exponent_form:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIXES[exponent]}"


def _kept_as_written(number: str, suffix: str) -> bool:
    """ParseQuantity's fast path, which keeps the string it parsed (resource/quantity.go): a decimal
    value whose digits and scale are already canonical, or a binary one not divisible by 8."""
    whole, _, fraction = number.lstrip("+-").partition(".")
    if whole:  # the parser drops leading zeros but keeps one digit: "0100" is kept, "0.500" is not
        whole = whole.lstrip("0") or "0"
    if suffix in _BINARY:
        return not fraction and whole.isdigit() and int(whole) % 8 != 0 and len(whole) <= 9
    shifted = whole + fraction
    exponent = int(suffix[1:]) if _is_exponent(suffix) else {
        "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[suffix]
    scale = exponent - len(fraction)
    return (len(shifted) <= 18 and scale >= -9 and scale % 3 == 0 and shifted.isdigit()
            and not shifted.endswith("000") and not shifted.startswith("0"))


def _ceil(amount: Decimal, places: int) -> Decimal:
    """``amount`` rounded up to ``places`` decimal places (resource.Quantity rounds up, never down)."""
    step = Decimal(1).scaleb(-places)
    return (amount / step).to_integral_value(rounding=ROUND_CEILING) * step
