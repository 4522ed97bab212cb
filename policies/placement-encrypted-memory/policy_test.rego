package vgate.rules_test.placement_encrypted_memory

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_encrypted_memory"

test_allows_node_selector_on_encrypted_label if {
	count(testing.denials(rule, testing.pod(testing.sensitive, testing.compliant_spec))) == 0
}

test_allows_confidential_runtime_class if {
	count(testing.denials(rule, testing.pod(
		testing.sensitive,
		{"runtimeClassName": "kata-qemu-snp"},
	))) == 0
}

test_allows_required_affinity_on_encrypted_label if {
	expression := {
		"key": "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled", "operator": "In",
		"values": ["true"],
	}
	spec := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
		"matchExpressions": [expression],
	}]}}}}
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 0
}

test_denies_sensitive_pod_on_any_node if {
	some violation in testing.denials(rule, testing.pod(testing.sensitive, {"containers": []}))
	contains(violation, "without memory encryption")
}

test_denies_label_value_other_than_true if {
	spec := {"nodeSelector": {"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "false"}}
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 1
}

test_denies_when_one_affinity_term_is_unencrypted if {
	encrypted := {"matchExpressions": [{
		"key": "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled",
		"operator": "In", "values": ["true"],
	}]}
	anywhere := {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
	spec := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
		encrypted, anywhere,
	]}}}}
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 1
}

test_denies_self_settable_feature_label_not_in_config if {
	spec := {"nodeSelector": {"feature.node.kubernetes.io/cpu-security.sev.snp.enabled": "true"}}
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 1
}

test_denies_each_unencrypted_job_task if {
	count(testing.denials(rule, testing.job(testing.sensitive, [
		testing.compliant_spec, {},
		{},
	]))) == 2
}

test_ignores_workloads_that_are_not_sensitive if {
	count(testing.denials(rule, testing.pod({}, {}))) == 0
}
