# METADATA
# title: No host ports
# description: |
#   Pod Security Standards, baseline, "Host Ports": a hostPort binds the node's own address,
#   around NetworkPolicies and Services, and collides with the node's other listeners.
# custom:
#   severity: medium
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.3.1 boundary protection"
#   remediation: Remove hostPort from every container port and expose the port through a Service.
#   pss:
#     check: Host Ports
#     level: baseline
#     fields:
#       - spec.{initContainers,containers,ephemeralContainers}[*].ports[*].hostPort
package vgate.rules.security_host_ports

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.plural
import data.vgate.lib.pss.uses

deny contains failure(where, "hostPort", detail, "baseline") if {
	some where, group in container_groups
	names := sort({c.name | some c in group.containers; some port in object.get(c, "ports", []); opens(port)})
	count(names) > 0
	ports := sort({port.hostPort | some c in group.containers; some port in object.get(c, "ports", []); opens(port)})
	detail := sprintf("%s %s %s %s", [
		containers_named(names), uses(names), plural("hostPort", ports),
		concat(", ", [sprintf("%v", [p]) | some p in ports]),
	])
}

opens(port) if object.get(port, "hostPort", 0) != 0
