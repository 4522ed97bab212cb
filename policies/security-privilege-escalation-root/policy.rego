# METADATA
# title: No privilege escalation, no root
# description: |
#   Containers may not explicitly allow privilege escalation (setuid binaries gaining
#   capabilities) nor run as uid 0. Containers that do not declare runAsNonRoot get a warning,
#   since their image may default to root.
# custom:
#   id: security-privilege-escalation-root
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Set allowPrivilegeEscalation false, runAsNonRoot true and a non-zero runAsUser.
package vgate.rules.security_privilege_escalation_root

import rego.v1

import data.vgate.lib.workload.containers
import data.vgate.lib.workload.judges_new_pods
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.templates

# A container's own securityContext overrides the pod's.
effective(spec, container, field) := container.securityContext[field]

effective(spec, container, field) := spec.securityContext[field] if not has_key(object.get(container, "securityContext", {}), field)

has_key(document, key) if _ = document[key]

deny contains {"rule": "security-privilege-escalation-root", "msg": msg} if {
	judges_new_pods
	some name, template in templates
	some container in containers(template.spec)
	container.securityContext.allowPrivilegeEscalation == true
	msg := sprintf(
		"%s: container %s of %s sets allowPrivilegeEscalation: true: set it to false",
		[obj.kind, container.name, name],
	)
}

deny contains {"rule": "security-privilege-escalation-root", "msg": msg} if {
	judges_new_pods
	some name, template in templates
	some container in containers(template.spec)
	effective(template.spec, container, "runAsUser") == 0
	msg := sprintf(
		"%s: container %s of %s runs as uid 0 (root): set runAsUser to a non-zero uid and runAsNonRoot: true",
		[obj.kind, container.name, name],
	)
}

warn contains {"rule": "security-privilege-escalation-root", "msg": msg} if {
	judges_new_pods
	some name, template in templates
	some container in containers(template.spec)
	not effective(template.spec, container, "runAsNonRoot") == true
	not effective(template.spec, container, "runAsUser") == 0
	msg := sprintf(
		"%s: container %s of %s does not set runAsNonRoot: true, so its image may run it as root",
		[obj.kind, container.name, name],
	)
}
