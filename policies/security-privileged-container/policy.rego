# METADATA
# title: No privileged containers
# description: |
#   A privileged container has every capability and every device of the node: it can read other
#   tenants' memory and disks. No workload scheduled through vgate may run one.
# custom:
#   id: security-privileged-container
#   severity: critical
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove securityContext.privileged, or set it to false.
package vgate.rules.security_privileged_container

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.obj

deny contains msg if {
	some judged in judged_containers
	judged.container.securityContext.privileged == true
	msg := sprintf(
		"%s: container %s of %s is privileged, which gives it the whole node: remove securityContext.privileged",
		[obj.kind, judged.container.name, judged.where],
	)
}
