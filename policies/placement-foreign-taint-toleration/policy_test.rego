package vgate.rules_test.placement_foreign_taint_toleration

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_foreign_taint_toleration"

tolerating(toleration) := testing.pod({}, {"tolerations": [toleration]})

test_allows_own_tenant if {
	count(testing.denials(rule, tolerating({
		"key": "dedicated", "operator": "Equal",
		"value": "research", "effect": "NoSchedule",
	}))) == 0
}

test_denies_other_tenant if {
	some violation in testing.denials(rule, tolerating({
		"key": "dedicated",
		"value": "serving", "effect": "NoSchedule",
	}))
	contains(violation, `belongs to tenant "research"`)
}

test_denies_any_value_of_the_dedicated_key if {
	count(testing.denials(rule, tolerating({
		"key": "dedicated",
		"operator": "Exists",
	}))) == 1
}

test_denies_tolerating_every_taint if {
	count(testing.denials(rule, tolerating({"operator": "Exists"}))) == 1
}

test_allows_unrelated_tolerations if {
	count(testing.denials(rule, tolerating({
		"key": "nvidia.com/gpu",
		"operator": "Exists", "effect": "NoSchedule",
	}))) == 0
}

test_namespace_without_tenant_may_not_tolerate_dedicated_nodes if {
	review := testing.pod_in("web", {}, {"tolerations": [{"key": "dedicated", "value": "research"}]})
	count(testing.denials(rule, review)) == 1
}

# Bypass: an UPDATE may add tolerations to a pending pod; those it adds are judged, those it had are not.
update_adding(before, after) := json.patch(testing.pod({}, {"tolerations": after}), [
	{"op": "replace", "path": "/request/operation", "value": "UPDATE"},
	{"op": "add", "path": "/request/oldObject", "value": testing.pod({}, {"tolerations": before}).request.object},
])

test_an_update_adding_a_foreign_toleration_is_denied if {
	foreign := {"key": "dedicated", "operator": "Equal", "value": "serving", "effect": "NoSchedule"}
	some violation in testing.denials(rule, update_adding([], [foreign]))
	contains(violation, `belongs to tenant "research"`)
	everything := {"operator": "Exists"}
	count(testing.denials(rule, update_adding([], [everything]))) == 1
}

test_an_update_that_adds_no_toleration_is_not_judged_again if {
	# A pod admitted before the rule existed keeps its tolerations through unrelated updates.
	old := {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
	count(testing.denials(rule, update_adding([old], [old]))) == 0
	own := {"key": "dedicated", "operator": "Equal", "value": "research", "effect": "NoSchedule"}
	count(testing.denials(rule, update_adding([old], [old, own]))) == 0
}
