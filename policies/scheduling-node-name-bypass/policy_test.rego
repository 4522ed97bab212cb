package vgate.rules_test.scheduling_node_name_bypass

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "scheduling_node_name_bypass"

test_denies_node_name_on_create if {
	some violation in testing.denials(rule, testing.pod({}, {"nodeName": "gpu-node-7"}))
	contains(violation, `spec.nodeName "gpu-node-7"`)
}

test_denies_node_name_in_a_job_template if {
	count(testing.denials(rule, testing.job({}, [{}, {"nodeName": "n1"}]))) == 1
}

test_allows_binding_updates_of_scheduled_pods if {
	count(testing.denials(rule, testing.as_update(testing.pod(
		{},
		{"nodeName": "gpu-node-7"},
	)))) == 0
}

test_a_debug_request_does_not_judge_the_running_pods_node_name_again if {
	added := [{"name": "debugger", "image": "registry.example.com/busybox:1"}]
	count(testing.denials(rule, testing.debug(testing.container_spec([]), [], added))) == 0
}
