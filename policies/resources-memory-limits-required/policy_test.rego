package vgate.rules_test.resources_memory_limits_required

import rego.v1

import data.vgate.lib.testing

queued(queue, spec) := json.patch(testing.pod({}, spec), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"scheduling.volcano.sh/queue-name": queue},
}])

test_denies_missing_limit_in_guaranteed_queue if {
	spec := {"initContainers": [{"name": "init"}], "containers": [{"name": "a",
		"resources": {"limits": {"memory": "1Gi"}}}]}
	some violation in testing.denials("resources_memory_limits_required", queued("training", spec))
	contains(violation, `containers ["init"] of pod have no memory limit, but queue "training" runs Guaranteed`)
}

test_allows_limits_everywhere if {
	count(testing.denials("resources_memory_limits_required", queued("training", {"containers": [{"name": "a",
		"resources": {"limits": {"memory": "1Gi"}}}]}))) == 0
}

test_ignores_queues_without_a_class if {
	count(testing.denials("resources_memory_limits_required", queued("default", {"containers": [{"name": "a"}]}))) == 0
}
