package vgate.rules_test.resources_memory_limit_cap

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "resources_memory_limit_cap"

with_limit(queue, limit) := json.patch(
	testing.pod({}, {"containers": [{
		"name": "a",
		"resources": {"limits": {"memory": limit}},
	}]}),
	[{
		"op": "add", "path": "/request/object/metadata/annotations",
		"value": {"scheduling.volcano.sh/queue-name": queue},
	}],
)

test_denies_limit_above_cap if {
	some violation in testing.denials(rule, with_limit("training", "65Gi"))
	contains(violation, `memory limit 65Gi, above queue "training"'s cap of 64Gi`)
}

test_allows_limit_at_cap_in_other_units if {
	count(testing.denials(rule, with_limit("training", "65536Mi"))) == 0
}

# "web" maps to no queue: the config gives it `default`, which has no cap.
outside(queue, limit) := json.patch(with_limit(queue, limit), [
	{"op": "replace", "path": "/request/namespace", "value": "web"},
	{"op": "replace", "path": "/request/object/metadata/namespace", "value": "web"},
])

test_ignores_queues_without_cap if {
	count(testing.denials(rule, outside("default", "2Ti"))) == 0
}

# Bypass: naming no queue (Volcano's `default`, with vgate.io/injected forged so /mutate keeps it),
# or reaching /validate unmutated, never escapes the namespace's queue: ml-training's is training.
test_naming_no_queue_is_judged_by_the_namespaces_queue if {
	forged := json.patch(with_limit("default", "65Gi"), [{
		"op": "add",
		"path": "/request/object/metadata/annotations/vgate.io~1injected", "value": "none",
	}])
	some violation in testing.denials(rule, forged)
	contains(violation, `above queue "training"'s cap of 64Gi`)
	unmutated := testing.pod({}, {"containers": [{"name": "a", "resources": {"limits": {"memory": "1Ti"}}}]})
	some refusal in testing.denials(rule, unmutated)
	contains(refusal, `memory limit 1Ti, above queue "training"'s cap`)
}

test_a_selector_queue_applies_when_the_namespace_maps_none if {
	labelled := json.patch(outside("", "65Gi"), [{
		"op": "add", "path": "/request/object/metadata/labels",
		"value": {"vgate.io/workload": "training"},
	}])
	some violation in testing.denials(rule, labelled)
	contains(violation, `above queue "training"'s cap`)
}

# A Volcano Job's template is raw JSON: a limit may be a number, or a string Kubernetes reads
# differently from OPA's units.parse_bytes.
test_a_number_is_a_quantity_too if {
	some violation in testing.denials(rule, with_limit("training", 322122547200))
	contains(violation, "memory limit 322122547200, above queue")
}

test_a_fraction_of_a_byte_rounds_up if {
	some violation in testing.denials(rule, with_limit("training", "68719476736.5"))
	contains(violation, "memory limit 68719476736.5, above queue")
	count(testing.denials(rule, with_limit("training", "68719476736.0"))) == 0
}

# A hair over the cap is over it: Kubernetes rounds "64.000000000000001Gi" up to 64Gi and a byte.
# (A float reads 64.000000000000001 as 64: vgate admitted what OPA, exact, refused.)
test_a_fraction_of_a_byte_too_small_for_a_float_rounds_up if {
	some violation in testing.denials(rule, with_limit("training", "64.000000000000001Gi"))
	contains(violation, "above queue")
	count(testing.denials(rule, with_limit("training", "64.000000000000000Gi"))) == 0
}

test_milli_is_not_mega if {
	count(testing.denials(rule, with_limit("training", "68719476736000m"))) == 0
	some violation in testing.denials(rule, with_limit("training", "68719476737000m"))
	contains(violation, "above queue")
}

test_a_limit_that_is_no_quantity_is_denied if {
	some violation in testing.denials(rule, with_limit("training", "300GB"))
	contains(violation, "memory limit 300GB, which is not a Kubernetes quantity")
	count(testing.denials(rule, outside("default", "300GB"))) == 0
}

# Bypass: a pod created at 1Gi in a capped queue resized in place (pods/resize) to 1Ti.
test_an_in_place_resize_above_the_cap_is_denied if {
	created := with_limit("training", "1Gi")
	resized := json.patch(with_limit("training", "1Ti"), [
		{"op": "replace", "path": "/request/operation", "value": "UPDATE"},
		{"op": "add", "path": "/request/subResource", "value": "resize"},
		{"op": "add", "path": "/request/oldObject", "value": created.request.object},
	])
	some violation in testing.denials(rule, resized)
	contains(violation, `container a of pod (resize) has memory limit 1Ti, above queue "training"'s cap`)
	within := json.patch(resized, [{
		"op": "replace",
		"path": "/request/object/spec/containers/0/resources/limits/memory", "value": "2Gi",
	}])
	count(testing.denials(rule, within)) == 0
}
