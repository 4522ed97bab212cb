package vgate.rules_test.resources_memory_limits_required

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "resources_memory_limits_required"

queued(queue, spec) := json.patch(testing.pod({}, spec), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"scheduling.volcano.sh/queue-name": queue},
}])

test_denies_missing_limit_in_guaranteed_queue if {
	spec := {"initContainers": [{"name": "init"}], "containers": [{
		"name": "a",
		"resources": {"limits": {"memory": "1Gi"}},
	}]}
	some violation in testing.denials(rule, queued("training", spec))
	contains(violation, `containers ["init"] of pod have no memory limit, but queue "training" runs Guaranteed`)
}

test_allows_limits_everywhere if {
	count(testing.denials(rule, queued("training", {"containers": [{
		"name": "a",
		"resources": {"limits": {"memory": "1Gi"}},
	}]}))) == 0
}

test_ignores_queues_without_a_class if {
	in_web := json.patch(queued("default", {"containers": [{"name": "a"}]}), [
		{"op": "replace", "path": "/request/namespace", "value": "web"},
		{"op": "replace", "path": "/request/object/metadata/namespace", "value": "web"},
	])
	count(testing.denials(rule, in_web)) == 0
}

# Bypass: an unmutated pod in ml-training (no queue named) is held to training's Guaranteed class.
test_a_pod_naming_no_queue_is_held_to_its_namespaces_class if {
	some violation in testing.denials(rule, testing.pod({}, {"containers": [{"name": "a"}]}))
	contains(violation, `queue "training" runs Guaranteed`)
}
