package vgate.rules.placement_foreign_taint_toleration_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.placement_foreign_taint_toleration as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

tolerating(toleration) := testing.pod({}, {"tolerations": [toleration]})

test_allows_own_tenant if {
	count(denials(tolerating({"key": "dedicated", "operator": "Equal", "value": "research", "effect": "NoSchedule"}))) == 0
}

test_denies_other_tenant if {
	some violation in denials(tolerating({"key": "dedicated", "value": "serving", "effect": "NoSchedule"}))
	contains(violation, `belongs to tenant "research"`)
}

test_denies_any_value_of_the_dedicated_key if {
	count(denials(tolerating({"key": "dedicated", "operator": "Exists"}))) == 1
}

test_denies_tolerating_every_taint if {
	count(denials(tolerating({"operator": "Exists"}))) == 1
}

test_allows_unrelated_tolerations if {
	count(denials(tolerating({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}))) == 0
}

test_namespace_without_tenant_may_not_tolerate_dedicated_nodes if {
	review := testing.pod_in("web", {}, {"tolerations": [{"key": "dedicated", "value": "research"}]})
	count(denials(review)) == 1
}
