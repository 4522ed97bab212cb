package vgate.rules_test.placement_single_zone

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_single_zone"

test_allows_sensitive_pod_pinned_by_node_selector if {
	count(testing.denials(rule, testing.pod(testing.sensitive, testing.compliant_spec))) == 0
}

test_allows_sensitive_pod_pinned_by_required_affinity if {
	spec := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
		"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}],
	}]}}}}
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 0
}

test_denies_sensitive_pod_without_zone if {
	some violation in testing.denials(rule, testing.pod(testing.sensitive, {"containers": []}))
	contains(violation, "pinned to 0 zones")
}

test_denies_affinity_allowing_two_zones if {
	spec := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
		"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}],
	}]}}}}
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 1
}

test_denies_affinity_terms_naming_different_zones if {
	term_a := {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}
	term_b := {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}
	spec := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
		term_a, term_b,
	]}}}}
	some violation in testing.denials(rule, testing.pod(testing.sensitive, spec))
	contains(violation, "pinned to 2 zones")
}

test_denies_job_tasks_in_different_zones if {
	spec_b := json.patch(testing.compliant_spec, [{
		"op": "replace", "path": "/nodeSelector/topology.kubernetes.io~1zone",
		"value": "zone-b",
	}])
	some violation in testing.denials(rule, testing.job(testing.sensitive, [
		testing.compliant_spec,
		spec_b,
	]))
	contains(violation, "different zones")
}

test_allows_job_tasks_in_one_zone if {
	count(testing.denials(rule, testing.job(testing.sensitive, [
		testing.compliant_spec,
		testing.compliant_spec,
	]))) == 0
}

test_ignores_workloads_that_are_not_sensitive if {
	count(testing.denials(rule, testing.pod({"app": "web"}, {"containers": []}))) == 0
}

test_ignores_updates if {
	count(testing.denials(rule, testing.as_update(testing.pod(
		testing.sensitive,
		{"containers": []},
	)))) == 0
}
