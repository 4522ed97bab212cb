package vgate.rules.scheduling_node_name_bypass_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.scheduling_node_name_bypass as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

test_denies_node_name_on_create if {
	some violation in denials(testing.pod({}, {"nodeName": "gpu-node-7"}))
	contains(violation, `spec.nodeName "gpu-node-7"`)
}

test_denies_node_name_in_a_job_template if {
	count(denials(testing.job({}, [{}, {"nodeName": "n1"}]))) == 1
}

test_allows_binding_updates_of_scheduled_pods if {
	count(denials(testing.as_update(testing.pod({}, {"nodeName": "gpu-node-7"})))) == 0
}

test_a_debug_request_does_not_judge_the_running_pods_node_name_again if {
	added := [{"name": "debugger", "image": "registry.example.com/busybox:1"}]
	count(denials(testing.debug(testing.container_spec([]), [], added))) == 0
}
