# METADATA
# title: No host ports
# description: |
#   A hostPort opens a port on the node's own address, outside Service and NetworkPolicy
#   control, and pins the pod to nodes where that port is free.
# custom:
#   id: security-host-ports
#   severity: medium
#   category: network
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.3.2 boundary protection"
#   remediation: Remove hostPort and expose the port through a Service.
package vgate.rules.security_host_ports

import rego.v1

import data.vgate.lib.workload.containers
import data.vgate.lib.workload.judges_new_pods
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.templates

deny contains {"rule": "security-host-ports", "msg": msg} if {
	judges_new_pods
	some name, template in templates
	some container in containers(template.spec)
	ports := [port.hostPort | some port in object.get(container, "ports", []); object.get(port, "hostPort", 0) > 0]
	count(ports) > 0
	msg := sprintf(
		"%s: container %s of %s opens host ports %v on the node: remove hostPort and expose the port through a Service",
		[obj.kind, container.name, name, ports],
	)
}
