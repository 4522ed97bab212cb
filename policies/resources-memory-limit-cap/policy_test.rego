package vgate.rules_test.resources_memory_limit_cap

import rego.v1

import data.vgate.lib.testing

with_limit(queue, limit) := json.patch(testing.pod({}, {"containers": [{"name": "a",
	"resources": {"limits": {"memory": limit}}}]}), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"scheduling.volcano.sh/queue-name": queue},
}])

test_denies_limit_above_cap if {
	some violation in testing.denials("resources_memory_limit_cap", with_limit("training", "65Gi"))
	contains(violation, `memory limit 65Gi, above queue "training"'s cap of 64Gi`)
}

test_allows_limit_at_cap_in_other_units if {
	count(testing.denials("resources_memory_limit_cap", with_limit("training", "65536Mi"))) == 0
}

test_ignores_queues_without_cap if {
	count(testing.denials("resources_memory_limit_cap", with_limit("default", "2Ti"))) == 0
}
