package vgate.rules.scheduling_volcano_scheduler_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.scheduling_volcano_scheduler as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

test_denies_default_scheduler_left_in_a_volcano_namespace if {
	some violation in denials(testing.pod({}, {"schedulerName": "default-scheduler"}))
	contains(violation, `names scheduler "default-scheduler"`)
}

test_allows_volcano if {
	count(denials(testing.pod({}, {"schedulerName": "volcano"}))) == 0
}

test_allows_other_schedulers_outside_volcano_namespaces if {
	count(denials(testing.pod_in("web", {}, {"schedulerName": "kube-batch"}))) == 0
}

test_denies_volcano_job_naming_another_scheduler if {
	review := json.patch(testing.job({}, [{}]), [{"op": "add", "path": "/request/object/spec/schedulerName", "value": "yunikorn"}])
	count(denials(review)) == 1
}

allowing(schedulers) := object.union(testing.config, {"volcano": {"allowedSchedulers": schedulers}})

denials_under(review, config) := result if {
	result := rule.deny with input as review with data.vgate.config as config
}

test_allows_a_scheduler_the_config_lists_for_volcano_resource_groups if {
	count(denials_under(testing.pod({}, {"schedulerName": "volcano-cpu"}), allowing(["volcano-cpu"]))) == 0
}

test_bypass_a_scheduler_named_like_an_allowed_one_is_denied if {
	count(denials_under(testing.pod({}, {"schedulerName": "volcano-cpu-evil"}), allowing(["volcano-cpu"]))) == 1
}
