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

_binary := {"Ki": 1024, "Mi": 1048576, "Gi": 1073741824, "Ti": 1099511627776, "Pi": 1125899906842624,
	"Ei": 1152921504606846976}

_decimal := {"n": 0.000000001, "u": 0.000001, "m": 0.001, "": 1, "k": 1000, "M": 1000000, "G": 1000000000,
	"T": 1000000000000, "P": 1000000000000000, "E": 1000000000000000000}

# The value of a quantity (a JSON number or a string in the grammar); undefined for anything else.
value(q) := q if is_number(q)

value(q) := (_sign[parts[1]] * to_number(_digits(parts[2], parts[3]))) * _multiplier(parts[4]) if {
	is_string(q)
	parts := regex.find_all_string_submatch_n(_grammar, q, 1)[0]
}

_sign := {"": 1, "+": 1, "-": -1}

# "5." and ".5" as to_number reads them in every engine: "5.0", "0.5" (regorus refuses the short forms).
_digits(whole, fraction) := concat("", [_or_zero(whole), ".", _or_zero(fraction)]) if count(whole) + count(fraction) > 0

_or_zero("") := "0"

_or_zero(digits) := digits if digits != ""

# A quantity of bytes: its value rounded up to a whole byte.
bytes(q) := ceil(value(q))

_multiplier(suffix) := _binary[suffix]

_multiplier(suffix) := _decimal[suffix]

_multiplier(suffix) := _power_of_ten(to_number(substring(suffix, 1, -1))) if regex.match(`^[eE][+-]?[0-9]+$`, suffix)

_power_of_ten(exponent) := product([10 | some _ in numbers.range(1, exponent)]) if exponent > 0

_power_of_ten(0) := 1

# Not recursive (1 / _power_of_ten(-exponent)): OPA refuses recursive rules (rego_recursion_error).
_power_of_ten(exponent) := 1 / product([10 | some _ in numbers.range(1, 0 - exponent)]) if exponent < 0
