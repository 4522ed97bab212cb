# METADATA
# title: Only allowed Linux capabilities
# description: |
#   Containers may add only the capabilities in security.allowedCapabilities (NET_BIND_SERVICE
#   by default); SYS_ADMIN, NET_ADMIN, SYS_PTRACE and the like cross the container boundary.
# custom:
#   id: security-added-capabilities
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove the capability from securityContext.capabilities.add.
package vgate.rules.security_added_capabilities

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.obj

allowed := {upper(c) | some c in data.vgate.config.security.allowedCapabilities}

normalised(capability) := trim_prefix(upper(capability), "CAP_")

deny contains msg if {
	some judged in judged_containers
	adds := judged.container.securityContext.capabilities.add
	added := {normalised(c) | some c in adds}
	extra := added - allowed
	count(extra) > 0
	msg := sprintf(
		concat(" ", [
			"%s: container %s of %s adds capabilities %v; only %v may be",
			"added: remove the others from securityContext.capabilities.add",
		]),
		[obj.kind, judged.container.name, judged.where, sort(extra), sort(allowed)],
	)
}
