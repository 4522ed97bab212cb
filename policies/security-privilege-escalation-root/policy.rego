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

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.obj

# What each container runs with, its own securityContext over the pod's: effective[i] is that of
# judged_containers[i], computed once per evaluation for the three rules below.
effective := [object.union(object.get(judged.spec, "securityContext", {}), object.get(judged.container,
	"securityContext", {})) |
	some judged in judged_containers
]

deny contains msg if {
	some judged in judged_containers
	judged.container.securityContext.allowPrivilegeEscalation == true
	msg := sprintf(
		"%s: container %s of %s sets allowPrivilegeEscalation: true: set it to false",
		[obj.kind, judged.container.name, judged.where],
	)
}

deny contains msg if {
	some i, judged in judged_containers
	effective[i].runAsUser == 0
	msg := sprintf(
		"%s: container %s of %s runs as uid 0 (root): set runAsUser to a non-zero uid and runAsNonRoot: true",
		[obj.kind, judged.container.name, judged.where],
	)
}

warn contains msg if {
	some i, judged in judged_containers
	not effective[i].runAsNonRoot == true
	not effective[i].runAsUser == 0
	msg := sprintf(
		"%s: container %s of %s does not set runAsNonRoot: true, so its image may run it as root",
		[obj.kind, judged.container.name, judged.where],
	)
}
