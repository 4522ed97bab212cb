# METADATA
# title: No privilege escalation
# description: |
#   Pod Security Standards, restricted, "Privilege Escalation" (v1.8+; Windows pods exempt from
#   v1.25): every container sets allowPrivilegeEscalation: false, so setuid binaries and file
#   capabilities cannot give its processes more than they started with. To deny an explicit
#   allowPrivilegeEscalation: true in baseline namespaces too, set this rule's action to deny in
#   enforcement.rules.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Set securityContext.allowPrivilegeEscalation to false in every container.
#   pss:
#     check: Privilege Escalation
#     level: restricted
#     fields:
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.allowPrivilegeEscalation
package vgate.rules.security_privilege_escalation

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.pss.windows_exempt

deny contains failure(where, "allowPrivilegeEscalation != false", detail, "restricted") if {
	minor >= 8
	some where, group in container_groups
	names := [c.name |
		some c in group.containers
		object.get(c, ["securityContext", "allowPrivilegeEscalation"], null) != false
	]
	count(names) > 0
	not windows_exempt(group.spec)
	detail := sprintf("%s must set securityContext.allowPrivilegeEscalation=false", [containers_named(names)])
}
