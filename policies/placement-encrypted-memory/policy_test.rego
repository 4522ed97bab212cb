package vgate.rules.placement_encrypted_memory_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.placement_encrypted_memory as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

test_allows_node_selector_on_encrypted_label if {
	count(denials(testing.pod(testing.sensitive, testing.compliant_spec))) == 0
}

test_allows_confidential_runtime_class if {
	count(denials(testing.pod(testing.sensitive, {"runtimeClassName": "kata-qemu-snp"}))) == 0
}

test_allows_required_affinity_on_encrypted_label if {
	expression := {"key": "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled", "operator": "In", "values": ["true"]}
	spec := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}}
	count(denials(testing.pod(testing.sensitive, spec))) == 0
}

test_denies_sensitive_pod_on_any_node if {
	some violation in denials(testing.pod(testing.sensitive, {"containers": []}))
	contains(violation, "without memory encryption")
}

test_denies_label_value_other_than_true if {
	spec := {"nodeSelector": {"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "false"}}
	count(denials(testing.pod(testing.sensitive, spec))) == 1
}

test_denies_when_one_affinity_term_is_unencrypted if {
	encrypted := {"matchExpressions": [{"key": "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled", "operator": "In", "values": ["true"]}]}
	anywhere := {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
	spec := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [encrypted, anywhere]}}}}
	count(denials(testing.pod(testing.sensitive, spec))) == 1
}

test_denies_self_settable_feature_label_not_in_config if {
	spec := {"nodeSelector": {"feature.node.kubernetes.io/cpu-security.sev.snp.enabled": "true"}}
	count(denials(testing.pod(testing.sensitive, spec))) == 1
}

test_denies_each_unencrypted_job_task if {
	count(denials(testing.job(testing.sensitive, [testing.compliant_spec, {}, {}]))) == 2
}

test_ignores_workloads_that_are_not_sensitive if {
	count(denials(testing.pod({}, {}))) == 0
}
