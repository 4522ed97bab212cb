package vgate.rules_test.security_run_as_non_root

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_run_as_non_root"

test_allows_true_on_the_pod_or_every_container if {
	count(testing.denials(rule, testing.restricted([]))) == 0
	count(testing.denials(rule, testing.restricted([
		{"op": "remove", "path": "/securityContext/runAsNonRoot"},
		{"op": "add", "path": "/containers/0/securityContext/runAsNonRoot", "value": true},
	]))) == 0
}

test_denies_unset if {
	testing.levels(rule, testing.restricted([{"op": "remove", "path": "/securityContext/runAsNonRoot"}])) == {
		`Pod: runAsNonRoot != true (pod or container "main" must set securityContext.runAsNonRoot=true)`: "restricted",
	}
}

test_denies_explicit_false_anywhere if {
	testing.denials(rule, testing.restricted([{"op": "replace", "path": "/securityContext/runAsNonRoot", "value": false}])) == {
		"Pod: runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)",
	}
	testing.denials(rule, testing.restricted([{
		"op": "add", "path": "/containers/0/securityContext/runAsNonRoot",
		"value": false,
	}])) == {`Pod: runAsNonRoot != true (container "main" must not set securityContext.runAsNonRoot=false)`}
}

test_user_namespace_pods_are_exempt_from_v1_35 if {
	userns := testing.restricted([
		{"op": "remove", "path": "/securityContext/runAsNonRoot"},
		{"op": "add", "path": "/hostUsers", "value": false},
	])
	count(testing.denials(rule, userns)) == 0
	count(testing.denials_under(rule, userns, testing.at_version("v1.34"))) == 1
}
