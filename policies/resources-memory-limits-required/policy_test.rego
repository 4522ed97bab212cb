package vgate.rules.resources_memory_limits_required_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.resources_memory_limits_required as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

queued(queue, spec) := json.patch(testing.pod({}, spec), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"scheduling.volcano.sh/queue-name": queue},
}])

test_denies_missing_limit_in_guaranteed_queue if {
	spec := {"initContainers": [{"name": "init"}], "containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}]}
	some violation in denials(queued("training", spec))
	contains(violation, `containers ["init"] of pod have no memory limit, but queue "training" runs Guaranteed`)
}

test_allows_limits_everywhere if {
	count(denials(queued("training", {"containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}]}))) == 0
}

test_ignores_queues_without_a_class if {
	count(denials(queued("default", {"containers": [{"name": "a"}]}))) == 0
}
