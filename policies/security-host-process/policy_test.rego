package vgate.rules_test.security_host_process

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_host_process"

host_process(path) := testing.restricted([{"op": "add", "path": path, "value": {"hostProcess": true}}])

test_denies_host_process_on_pod_or_container if {
	testing.levels(rule, host_process("/securityContext/windowsOptions")) == {
		"Pod: hostProcess (pod must not set securityContext.windowsOptions.hostProcess=true)": "baseline",
	}
	testing.denials(rule, host_process("/containers/0/securityContext/windowsOptions")) == {
		`Pod: hostProcess (container "main" must not set securityContext.windowsOptions.hostProcess=true)`,
	}
	both := testing.restricted([
		{"op": "add", "path": "/securityContext/windowsOptions", "value": {"hostProcess": true}},
		{"op": "add", "path": "/containers/0/securityContext/windowsOptions", "value": {"hostProcess": true}},
	])
	testing.denials(rule, both) == {
		`Pod: hostProcess (pod and container "main" must not set securityContext.windowsOptions.hostProcess=true)`,
	}
}

test_allows_false_and_unset if {
	count(testing.denials(rule, testing.restricted([{
		"op": "add", "path": "/securityContext/windowsOptions",
		"value": {"hostProcess": false},
	}]))) == 0
	count(testing.denials(rule, testing.restricted([]))) == 0
}
