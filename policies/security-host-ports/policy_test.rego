package vgate.rules_test.security_host_ports

import rego.v1

import data.vgate.lib.testing

test_denies_host_port if {
	spec := testing.container_spec([{"op": "add", "path": "/ports", "value": [{"containerPort": 80, "hostPort": 8080}]}])
	some violation in testing.denials("security_host_ports", testing.pod({}, spec))
	contains(violation, "opens host ports [8080]")
}

test_allows_container_port_and_zero_host_port if {
	spec := testing.container_spec([{"op": "add", "path": "/ports", "value": [{"containerPort": 80, "hostPort": 0}]}])
	count(testing.denials("security_host_ports", testing.pod({}, spec))) == 0
}
