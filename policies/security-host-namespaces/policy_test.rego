package vgate.rules.security_host_namespaces_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.security_host_namespaces as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

test_denies_host_pid_and_ipc_in_one_message if {
	some violation in denials(testing.pod({}, {"hostPID": true, "hostIPC": true}))
	contains(violation, `["hostPID", "hostIPC"]`)
}

test_denies_host_network_of_any_workload if {
	count(denials(testing.job({}, [{"hostNetwork": true}]))) == 1
}

test_allows_explicit_false if {
	count(denials(testing.pod({}, {"hostPID": false, "hostNetwork": false}))) == 0
}
