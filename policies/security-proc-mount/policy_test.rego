package vgate.rules_test.security_proc_mount

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_proc_mount"

unmasked(host_users) := testing.restricted([
	{"op": "add", "path": "/containers/0/securityContext/procMount", "value": "Unmasked"},
	{"op": "add", "path": "/hostUsers", "value": host_users},
])

test_allows_default_and_unset if {
	count(testing.denials(rule, testing.restricted([{
		"op": "add", "path": "/containers/0/securityContext/procMount",
		"value": "Default",
	}]))) == 0
	count(testing.denials(rule, testing.restricted([]))) == 0
}

test_denies_unmasked_at_baseline if {
	testing.levels(rule, unmasked(true)) == {
		`Pod: procMount (container "main" must not set securityContext.procMount to "Unmasked")`: "baseline",
	}
}

test_a_user_namespace_pod_is_relaxed_at_baseline_only_from_v1_35 if {
	testing.levels(rule, unmasked(false)) == {
		`Pod: procMount (container "main" must not set securityContext.procMount to "Unmasked")`: "restricted",
	}
	some msg, "baseline" in testing.levels_under(rule, unmasked(false), testing.at_version("v1.34"))
	contains(msg, "procMount")
}
