package vgate.rules_test.security_apparmor

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_apparmor"

with_profile(path, type) := testing.restricted([{"op": "add", "path": path, "value": {"type": type}}])

test_allows_runtime_default_localhost_and_unset if {
	every type in ["RuntimeDefault", "Localhost"] {
		count(testing.denials(rule, with_profile("/securityContext/appArmorProfile", type))) == 0
		count(testing.denials(rule, with_profile("/containers/0/securityContext/appArmorProfile", type))) == 0
	}
	count(testing.denials(rule, testing.restricted([]))) == 0
}

test_denies_unconfined_on_pod_or_container if {
	testing.levels(rule, with_profile("/securityContext/appArmorProfile", "Unconfined")) == {
		`Pod: forbidden AppArmor profile (pod must not set securityContext.appArmorProfile.type to "Unconfined")`: "baseline",
	}
	testing.denials(rule, with_profile("/containers/0/securityContext/appArmorProfile", "Unconfined")) == {
		`Pod: forbidden AppArmor profile (container "main" must not set securityContext.appArmorProfile.type to "Unconfined")`,
	}
}

test_names_only_who_set_a_forbidden_profile if {
	pod_only := testing.restricted([
		{"op": "add", "path": "/securityContext/appArmorProfile", "value": {"type": "Unconfined"}},
		{"op": "add", "path": "/containers/0/securityContext/appArmorProfile", "value": {"type": "Localhost"}},
	])
	testing.denials(rule, pod_only) == {
		`Pod: forbidden AppArmor profile (pod must not set securityContext.appArmorProfile.type to "Unconfined")`,
	}
	both := testing.restricted([
		{"op": "add", "path": "/securityContext/appArmorProfile", "value": {"type": "Unconfined"}},
		{"op": "add", "path": "/containers/0/securityContext/appArmorProfile", "value": {"type": "Unconfined"}},
	])
	testing.denials(rule, both) == {
		`Pod: forbidden AppArmor profile (pod and container "main" must not set securityContext.appArmorProfile.type to "Unconfined")`,
	}
}

annotated(value) := json.patch(testing.restricted([]), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"container.apparmor.security.beta.kubernetes.io/main": value},
}])

test_the_annotation_counts_too if {
	every value in ["", "runtime/default", "localhost/my-profile"] {
		count(testing.denials(rule, annotated(value))) == 0
	}
	testing.denials(rule, annotated("unconfined")) == {
		`Pod: forbidden AppArmor profile (forbidden annotations container.apparmor.security.beta.kubernetes.io/main="unconfined")`,
	}
}
