# Kubernetes resource quantities, as resource.Quantity reads them, for every rule that compares resources.
#
# A Pod's quantities reach a webhook as canonical strings ("300Gi"), but a Volcano Job stores its
# pod templates as raw JSON: a limit may be a JSON number (322122547200) or any string the
# grammar allows ("300Gi", "322122547200", "3.2e11", "68719476736.5", "100m"). OPA's
# units.parse_bytes takes "m" for mega (Kubernetes: milli), refuses numbers and rounds fractions
# differently from regorus, so it is not used. The grammar is resource.Quantity's:
# <signed decimal><suffix>, suffix a binary (Ki..Ei), decimal SI (n, u, m, "", k, M, G, T, P, E)
# or decimal exponent (e3, E-2) one. Byte counts round up to a whole byte, as Quantity.Value() does.
package vgate.lib.quantity

import rego.v1

# sign, whole digits, fraction digits, suffix; at least one digit (checked by _digits).
_grammar := `^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]{1,2}|[numkMGTPE])?$`

_binary := {
	"Ki": 1024, "Mi": 1048576, "Gi": 1073741824, "Ti": 1099511627776, "Pi": 1125899906842624,
	"Ei": 1152921504606846976,
}

# Decimal suffixes as powers of ten: a fraction is divided by, never multiplied by (0.001 has no exact
# binary form, and OPA's multiplication by it gives 0.099999999999999999995 for "100m").
_decimal := {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# The value of a quantity (a JSON number or a string in the grammar); undefined for anything else.
value(q) := q if is_number(q)

value(q) := _value(_parts(q))

_value(parts) := _scaled(_sign[parts[1]] * to_number(_digits(parts[2], parts[3])), parts[4])

# A string's sign, whole digits, fraction digits and suffix: the grammar matched once per call.
_parts(q) := regex.find_all_string_submatch_n(_grammar, q, 1)[0] if is_string(q)

_sign := {"": 1, "+": 1, "-": -1}

# "5." and ".5" as to_number reads them in every engine: "5.0", "0.5" (regorus refuses the short forms).
_digits(whole, fraction) := concat("", [_or_zero(whole), ".", _or_zero(fraction)]) if count(whole) + count(fraction) > 0

_or_zero("") := "0"

_or_zero(digits) := digits if digits != ""

# Digits as a whole number; leading zeros dropped (regorus's to_number refuses "007").
_integer(digits) := to_number(_or_zero(trim_left(digits, "0")))

# A quantity of bytes: its value rounded up to a whole byte, as Quantity.Value() does. The fraction
# is scaled and rounded up on its own: a float reads 64.000000000000001 as 64, so ceil(value(q))
# would lose the byte Kubernetes counts (OPA, exact, keeps it; both engines agree this way).
bytes(q) := ceil(q) if is_number(q)

bytes(q) := _bytes(_parts(q))

# Whole digits with a binary or a whole decimal suffix, as the API server writes a pod's ("64Gi",
# "512M", "1073741824"): their product, exact in both engines, with no scaling of a fraction.
_bytes(parts) := (_sign[parts[1]] * _integer(parts[2])) * _whole_multiple[parts[4]] if _whole(parts)

_bytes(parts) := whole + ceil(fraction) if {
	not _whole(parts)
	whole := _scaled(_sign[parts[1]] * _integer(parts[2]), parts[4])
	whole == floor(whole) # a suffix of a whole multiple: the fraction is all that needs rounding
	_digits(parts[2], parts[3])
	fraction := _times_ten_to(_scaled(_sign[parts[1]] * _integer(parts[3]), parts[4]), 0 - count(parts[3]))
}

_bytes(parts) := ceil(_value(parts)) if {
	not _whole(parts)
	whole := _scaled(_sign[parts[1]] * _integer(parts[2]), parts[4])
	whole != floor(whole) # milli and the like: the value is small, a float holds it
}

_whole(parts) if {
	parts[3] == ""
	parts[2] != ""
	_whole_multiple[parts[4]]
}

_whole_multiple := object.union(_binary, {
	"": 1, "k": 1000, "M": 1000000, "G": 1000000000, "T": 1000000000000, "P": 1000000000000000,
	"E": 1000000000000000000,
})

_scaled(x, suffix) := x * _binary[suffix]

_scaled(x, suffix) := _times_ten_to(x, _decimal[suffix])

# The grammar leaves an exponent as the only other suffix: "e3", "E-2".
_scaled(x, suffix) := _times_ten_to(x, to_number(substring(suffix, 1, -1))) if {
	not _binary[suffix]
	not _decimal[suffix]
}

# x * 10^exponent, dividing for a negative exponent. Not recursive: OPA refuses recursive rules.
_times_ten_to(x, exponent) := x * _ten_to(exponent) if exponent >= 0

_times_ten_to(x, exponent) := x / _ten_to(0 - exponent) if exponent < 0

_ten_to(exponent) := product([10 | some _ in numbers.range(1, exponent)]) if exponent > 0

_ten_to(0) := 1
