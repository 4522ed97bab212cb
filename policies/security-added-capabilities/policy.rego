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

import data.vgate.lib.workload.containers
import data.vgate.lib.workload.judges_new_pods
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.templates

allowed := {upper(c) | some c in data.vgate.config.security.allowedCapabilities}

# Kubernetes accepts both "SYS_ADMIN" and "CAP_SYS_ADMIN".
normalised(capability) := trim_prefix(upper(capability), "CAP_")

deny contains {"rule": "security-added-capabilities", "msg": msg} if {
	judges_new_pods
	some name, template in templates
	some container in containers(template.spec)
	added := {normalised(c) | some c in object.get(container, ["securityContext", "capabilities", "add"], [])}
	extra := added - allowed
	count(extra) > 0
	msg := sprintf(
		"%s: container %s of %s adds capabilities %v; only %v may be added: remove the others from securityContext.capabilities.add",
		[obj.kind, container.name, name, sort(extra), sort(allowed)],
	)
}
