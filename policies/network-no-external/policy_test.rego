package vgate.rules_test.network_no_external

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "network_no_external"

test_allows_labelled_pod_without_host_network if {
	count(testing.denials(rule, testing.pod(testing.sensitive, testing.compliant_spec))) == 0
}

test_denies_host_network if {
	spec := json.patch(testing.compliant_spec, [{"op": "add", "path": "/hostNetwork", "value": true}])
	some violation in testing.denials(rule, testing.pod(testing.sensitive, spec))
	contains(violation, "hostNetwork")
}

test_denies_host_port_in_init_container if {
	spec := json.patch(testing.compliant_spec, [{"op": "add", "path": "/initContainers", "value": [{
		"name": "init",
		"ports": [{"containerPort": 53, "hostPort": 53}],
	}]}])
	some violation in testing.denials(rule, testing.pod(testing.sensitive, spec))
	contains(violation, "container init of pod opens hostPort 53")
}

test_allows_container_port_without_host_port if {
	spec := json.patch(testing.compliant_spec, [{
		"op": "add", "path": "/containers/0/ports",
		"value": [{"containerPort": 8080}],
	}])
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 0
}

test_denies_missing_egress_label if {
	some violation in testing.denials(rule, testing.pod(
		{"vgate.io/data-classification": "sensitive"},
		testing.compliant_spec,
	))
	contains(violation, "vgate.io/egress=deny")
}

test_denies_wrong_egress_label_value if {
	labels := {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "allow"}
	count(testing.denials(rule, testing.pod(labels, testing.compliant_spec))) == 1
}

test_denies_job_task_without_egress_label if {
	count(testing.denials(rule, testing.job(
		{"vgate.io/data-classification": "sensitive"},
		[testing.compliant_spec],
	))) == 1
}

test_ignores_host_network_of_workloads_that_are_not_sensitive if {
	count(testing.denials(rule, testing.pod({}, {"hostNetwork": true}))) == 0
}
