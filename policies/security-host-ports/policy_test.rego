package vgate.rules.security_host_ports_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.security_host_ports as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

test_denies_host_port if {
	spec := testing.container_spec([{"op": "add", "path": "/ports", "value": [{"containerPort": 80, "hostPort": 8080}]}])
	some violation in denials(testing.pod({}, spec))
	contains(violation, "opens host ports [8080]")
}

test_allows_container_port_and_zero_host_port if {
	spec := testing.container_spec([{"op": "add", "path": "/ports", "value": [{"containerPort": 80, "hostPort": 0}]}])
	count(denials(testing.pod({}, spec))) == 0
}
