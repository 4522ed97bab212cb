package vgate.rules_test.security_privilege_escalation_root

import rego.v1

import data.vgate.lib.testing

with_context(pod_context, container_context) := testing.pod({}, {
	"securityContext": pod_context,
	"containers": [{"name": "app", "securityContext": container_context}],
})

test_denies_explicit_privilege_escalation if {
	some violation in testing.denials("security_privilege_escalation_root", with_context({},
		{"allowPrivilegeEscalation": true}))
	contains(violation, "allowPrivilegeEscalation: true")
}

test_denies_root_from_the_pod_context if {
	some violation in testing.denials("security_privilege_escalation_root", with_context({"runAsUser": 0}, {}))
	contains(violation, "runs as uid 0")
}

test_container_context_overrides_the_pod if {
	count(testing.denials("security_privilege_escalation_root", with_context({"runAsUser": 0}, {"runAsUser": 1000,
		"runAsNonRoot": true}))) == 0
}

test_warns_without_run_as_non_root if {
	count(testing.warnings("security_privilege_escalation_root", with_context({}, {}))) == 1
	count(testing.warnings("security_privilege_escalation_root", with_context({"runAsNonRoot": true}, {}))) == 0
}
