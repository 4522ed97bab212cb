package vgate.rules_test.security_run_as_user

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_run_as_user"

test_allows_non_zero_and_unset if {
	count(testing.denials(rule, testing.restricted([{"op": "add", "path": "/securityContext/runAsUser", "value": 1000}]))) == 0
	count(testing.denials(rule, testing.restricted([]))) == 0
}

test_denies_zero_on_pod_or_container if {
	testing.levels(rule, testing.restricted([{"op": "add", "path": "/securityContext/runAsUser", "value": 0}])) == {
		"Pod: runAsUser=0 (pod must not set runAsUser=0)": "restricted",
	}
	testing.denials(rule, testing.restricted([{"op": "add", "path": "/containers/0/securityContext/runAsUser", "value": 0}])) == {
		`Pod: runAsUser=0 (container "main" must not set runAsUser=0)`,
	}
}

test_is_judged_from_v1_23_and_relaxed_for_user_namespaces_from_v1_35 if {
	root := testing.restricted([{"op": "add", "path": "/securityContext/runAsUser", "value": 0}])
	count(testing.denials_under(rule, root, testing.at_version("v1.22"))) == 0
	userns := json.patch(root, [{"op": "add", "path": "/request/object/spec/hostUsers", "value": false}])
	count(testing.denials(rule, userns)) == 0
	count(testing.denials_under(rule, userns, testing.at_version("v1.34"))) == 1
}
