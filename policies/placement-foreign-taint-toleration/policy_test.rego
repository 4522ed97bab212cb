package vgate.rules_test.placement_foreign_taint_toleration

import rego.v1

import data.vgate.lib.testing

tolerating(toleration) := testing.pod({}, {"tolerations": [toleration]})

test_allows_own_tenant if {
	count(testing.denials("placement_foreign_taint_toleration", tolerating({"key": "dedicated", "operator": "Equal",
		"value": "research", "effect": "NoSchedule"}))) == 0
}

test_denies_other_tenant if {
	some violation in testing.denials("placement_foreign_taint_toleration", tolerating({"key": "dedicated",
		"value": "serving", "effect": "NoSchedule"}))
	contains(violation, `belongs to tenant "research"`)
}

test_denies_any_value_of_the_dedicated_key if {
	count(testing.denials("placement_foreign_taint_toleration", tolerating({"key": "dedicated",
		"operator": "Exists"}))) == 1
}

test_denies_tolerating_every_taint if {
	count(testing.denials("placement_foreign_taint_toleration", tolerating({"operator": "Exists"}))) == 1
}

test_allows_unrelated_tolerations if {
	count(testing.denials("placement_foreign_taint_toleration", tolerating({"key": "nvidia.com/gpu",
		"operator": "Exists", "effect": "NoSchedule"}))) == 0
}

test_namespace_without_tenant_may_not_tolerate_dedicated_nodes if {
	review := testing.pod_in("web", {}, {"tolerations": [{"key": "dedicated", "value": "research"}]})
	count(testing.denials("placement_foreign_taint_toleration", review)) == 1
}
