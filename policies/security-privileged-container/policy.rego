# METADATA
# title: No privileged containers
# description: |
#   Pod Security Standards, baseline, "Privileged Containers": a privileged container has every
#   device and capability of the node; it can leave the container at will.
# custom:
#   severity: critical
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove securityContext.privileged (or set it to false) in every container.
#   pss:
#     check: Privileged Containers
#     level: baseline
#     fields:
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.privileged
package vgate.rules.security_privileged_container

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure

deny contains failure(
	where, "privileged", sprintf(
		"%s must not set securityContext.privileged=true",
		[containers_named(names)],
	),
	"baseline",
) if {
	some where, group in container_groups
	names := [c.name | some c in group.containers; c.securityContext.privileged == true]
	count(names) > 0
}
