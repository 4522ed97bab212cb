package vgate.rules_test.scheduling_priority_class_allowed

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "scheduling_priority_class_allowed"

in_queue(queue, class) := json.patch(testing.pod({}, {"priorityClassName": class}), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"scheduling.volcano.sh/queue-name": queue},
}])

test_allows_a_class_in_the_allowed_list if {
	count(testing.denials(rule, in_queue("training", "vgate-normal"))) == 0
}

test_denies_a_class_outside_the_allowed_list if {
	some violation in testing.denials(rule, in_queue("training", "vgate-critical"))
	contains(violation, `queue "training" uses priority class "vgate-critical"`)
}

in_web(queue, class) := json.patch(in_queue(queue, class), [
	{"op": "replace", "path": "/request/namespace", "value": "web"},
	{"op": "replace", "path": "/request/object/metadata/namespace", "value": "web"},
])

test_queue_without_list_allows_only_its_own_class if {
	count(testing.denials(rule, in_web("default", "vgate-normal"))) == 0
	count(testing.denials(rule, in_web("default", "vgate-high"))) == 1
}

# Bypass: naming Volcano's `default` queue in ml-training does not buy default's classes.
test_naming_no_queue_is_judged_by_the_namespaces_queue if {
	some violation in testing.denials(rule, in_queue("default", "vgate-critical"))
	contains(violation, `queue "training" uses priority class "vgate-critical"`)
}

test_unknown_queues_are_left_to_the_queue_rule if {
	count(testing.denials(rule, in_queue("nope", "anything"))) == 0
}

test_kubernetes_system_classes_are_never_denied if {
	count(testing.denials(rule, in_queue("training", "system-node-critical"))) == 0
	count(testing.denials(rule, in_web("default", "system-cluster-critical"))) == 0
}

test_a_class_named_like_a_system_class_is_judged if {
	count(testing.denials(rule, in_queue("training", "system-node-critical-2"))) == 1
}
