package vgate.rules_test.security_host_namespaces

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_host_namespaces"

test_denies_each_host_namespace_in_one_message if {
	levels := testing.levels(rule, testing.pod({}, {"hostPID": true, "hostIPC": true, "containers": []}))
	levels == {"Pod: host namespaces (hostPID=true, hostIPC=true)": "baseline"}
	every field in ["hostNetwork", "hostPID", "hostIPC"] {
		count(testing.denials(rule, testing.pod({}, {field: true, "containers": []}))) == 1
	}
}

test_denies_host_network_of_any_workload if {
	count(testing.denials(rule, testing.job({}, [{"hostNetwork": true}]))) == 1
}

test_allows_false_and_unset if {
	count(testing.denials(rule, testing.pod({}, {"hostPID": false, "hostNetwork": false, "hostIPC": false}))) == 0
	count(testing.denials(rule, testing.pod({}, {}))) == 0
}
