package vgate.rules_test.scheduling_volcano_scheduler

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "scheduling_volcano_scheduler"

test_denies_default_scheduler_left_in_a_volcano_namespace if {
	some violation in testing.denials(rule, testing.pod(
		{},
		{"schedulerName": "default-scheduler"},
	))
	contains(violation, `names scheduler "default-scheduler"`)
}

test_allows_volcano if {
	count(testing.denials(rule, testing.pod({}, {"schedulerName": "volcano"}))) == 0
}

test_allows_other_schedulers_outside_volcano_namespaces if {
	count(testing.denials(rule, testing.pod_in("web", {}, {"schedulerName": "kube-batch"}))) == 0
}

test_denies_volcano_job_naming_another_scheduler if {
	review := json.patch(testing.job({}, [{}]), [{
		"op": "add", "path": "/request/object/spec/schedulerName",
		"value": "yunikorn",
	}])
	count(testing.denials(rule, review)) == 1
}

allowing(schedulers) := object.union(testing.config, {"volcano": {"allowedSchedulers": schedulers}})

test_allows_a_scheduler_the_config_lists_for_volcano_resource_groups if {
	count(testing.denials_under(
		rule, testing.pod({}, {"schedulerName": "volcano-cpu"}),
		allowing(["volcano-cpu"]),
	)) == 0
}

test_bypass_a_scheduler_named_like_an_allowed_one_is_denied if {
	count(testing.denials_under(
		rule, testing.pod({}, {"schedulerName": "volcano-cpu-evil"}),
		allowing(["volcano-cpu"]),
	)) == 1
}
