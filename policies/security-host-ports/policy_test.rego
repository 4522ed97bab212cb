package vgate.rules_test.security_host_ports

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_host_ports"

with_ports(ports) := testing.pod({}, testing.container_spec([{"op": "add", "path": "/ports", "value": ports}]))

test_denies_host_ports_naming_container_and_ports if {
	levels := testing.levels(rule, with_ports([{"containerPort": 80, "hostPort": 8080}, {"containerPort": 443, "hostPort": 8443}]))
	levels == {`Pod: hostPort (container "main" uses hostPorts 8080, 8443)`: "baseline"}
}

test_names_every_container_that_opens_one if {
	spec := {"containers": [
		{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}]},
		{"name": "b", "ports": [{"containerPort": 81, "hostPort": 81}]},
	]}
	testing.denials(rule, testing.pod({}, spec)) == {`Pod: hostPort (containers "a", "b" use hostPorts 80, 81)`}
}

test_allows_container_port_and_zero_host_port if {
	count(testing.denials(rule, with_ports([{"containerPort": 80, "hostPort": 0}, {"containerPort": 81}]))) == 0
}
