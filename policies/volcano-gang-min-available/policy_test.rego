package vgate.rules_test.volcano_gang_min_available

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "volcano_gang_min_available"

job_with(patch) := json.patch(testing.job({}, [{}, {}]), patch)

test_allows_min_available_equal_to_replicas if {
	count(testing.denials(rule, job_with([{
		"op": "add",
		"path": "/request/object/spec/minAvailable", "value": 2,
	}]))) == 0
}

test_denies_min_available_above_replicas if {
	some violation in testing.denials(rule, job_with([{
		"op": "add",
		"path": "/request/object/spec/minAvailable", "value": 3,
	}]))
	contains(violation, "minAvailable 3 exceeds its 2 replicas")
}

test_denies_task_min_available_above_its_replicas if {
	some violation in testing.denials(rule, job_with([{
		"op": "add",
		"path": "/request/object/spec/tasks/0/minAvailable", "value": 2,
	}]))
	contains(violation, "task t0 minAvailable 2 exceeds its 1 replicas")
}
