package vgate.rules_test.security_host_namespaces

import rego.v1

import data.vgate.lib.testing

test_denies_host_pid_and_ipc_in_one_message if {
	some violation in testing.denials("security_host_namespaces", testing.pod({}, {"hostPID": true, "hostIPC": true}))
	contains(violation, `["hostPID", "hostIPC"]`)
}

test_denies_host_network_of_any_workload if {
	count(testing.denials("security_host_namespaces", testing.job({}, [{"hostNetwork": true}]))) == 1
}

test_allows_explicit_false if {
	count(testing.denials("security_host_namespaces", testing.pod({}, {"hostPID": false, "hostNetwork": false}))) == 0
}
