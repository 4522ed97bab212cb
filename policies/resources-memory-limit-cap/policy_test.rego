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

# A Volcano Job's template is raw JSON: a limit may be a number, or a string Kubernetes reads
# differently from OPA's units.parse_bytes.
test_a_number_is_a_quantity_too if {
	some violation in testing.denials("resources_memory_limit_cap", with_limit("training", 322122547200))
	contains(violation, "memory limit 322122547200, above queue")
}

test_a_fraction_of_a_byte_rounds_up if {
	some violation in testing.denials("resources_memory_limit_cap", with_limit("training", "68719476736.5"))
	contains(violation, "memory limit 68719476736.5, above queue")
	count(testing.denials("resources_memory_limit_cap", with_limit("training", "68719476736.0"))) == 0
}

test_milli_is_not_mega if {
	count(testing.denials("resources_memory_limit_cap", with_limit("training", "68719476736000m"))) == 0
	some violation in testing.denials("resources_memory_limit_cap", with_limit("training", "68719476737000m"))
	contains(violation, "above queue")
}

test_a_limit_that_is_no_quantity_is_denied if {
	some violation in testing.denials("resources_memory_limit_cap", with_limit("training", "300GB"))
	contains(violation, "memory limit 300GB, which is not a Kubernetes quantity")
	count(testing.denials("resources_memory_limit_cap", with_limit("default", "300GB"))) == 0
}
