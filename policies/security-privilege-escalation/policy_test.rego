package vgate.rules_test.security_privilege_escalation

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_privilege_escalation"

test_allows_false if {
	count(testing.denials(rule, testing.restricted([]))) == 0
}

test_denies_true_and_unset if {
	every patch in [
		{"op": "replace", "path": "/containers/0/securityContext/allowPrivilegeEscalation", "value": true},
		{"op": "remove", "path": "/containers/0/securityContext/allowPrivilegeEscalation"},
	] {
		testing.levels(rule, testing.restricted([patch])) == {
			`Pod: allowPrivilegeEscalation != false (container "main" must set securityContext.allowPrivilegeEscalation=false)`: "restricted",
		}
	}
}

test_windows_pods_are_exempt_from_v1_25 if {
	windows := testing.restricted([
		{"op": "remove", "path": "/containers/0/securityContext/allowPrivilegeEscalation"},
		{"op": "add", "path": "/os", "value": {"name": "windows"}},
	])
	count(testing.denials(rule, windows)) == 0
	count(testing.denials_under(rule, windows, testing.at_version("v1.24"))) == 1
	count(testing.denials_under(rule, windows, testing.at_version("v1.7"))) == 0
}

test_judged_from_v1_8 if {
	unset := testing.restricted([{"op": "remove", "path": "/containers/0/securityContext/allowPrivilegeEscalation"}])
	count(testing.denials_under(rule, unset, testing.at_version("v1.7"))) == 0
	count(testing.denials_under(rule, unset, testing.at_version("v1.8"))) == 1
}
