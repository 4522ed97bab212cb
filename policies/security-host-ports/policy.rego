# METADATA
# title: No host ports
# description: |
#   A hostPort opens a port on the node's own address, outside Service and NetworkPolicy
#   control, and pins the pod to nodes where that port is free.
# custom:
#   id: security-host-ports
#   severity: medium
#   category: network
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.3.1 boundary protection"
#   remediation: Remove hostPort and expose the port through a Service.
package vgate.rules.security_host_ports

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.obj

deny contains msg if {
	some judged in judged_containers
	some opened in judged.container.ports
	opened.hostPort > 0 # any of them: the message lists them all (one message per container)
	ports := [port.hostPort | some port in judged.container.ports; object.get(port, "hostPort", 0) > 0]
	msg := sprintf(
		"%s: container %s of %s opens host ports %v on the node: remove hostPort and expose the port through a Service",
		[obj.kind, judged.container.name, judged.where, ports],
	)
}
