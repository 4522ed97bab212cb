# METADATA
# title: Not uid 0
# description: |
#   Pod Security Standards, restricted, "Running as Non-root user" (v1.23+): runAsUser may not
#   be 0 on the pod or any container. Pods with their own user namespace (hostUsers: false) are
#   exempt from v1.35.
# custom:
#   severity: medium
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Set runAsUser to a non-zero uid, or remove it and let the image's user (and runAsNonRoot) decide.
#   pss:
#     check: Running as Non-root user
#     level: restricted
#     fields:
#       - spec.securityContext.runAsUser
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.runAsUser
package vgate.rules.security_run_as_user

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.pss.setters
import data.vgate.lib.pss.user_namespace_relaxed

deny contains failure(where, "runAsUser=0", detail, "restricted") if {
	minor >= 23
	some where, group in container_groups
	pod_set := object.get(group.spec, ["securityContext", "runAsUser"], null) == 0
	names := [c.name | some c in group.containers; object.get(c, ["securityContext", "runAsUser"], null) == 0]
	true in [pod_set, count(names) > 0]
	not user_namespace_relaxed(group.spec)
	detail := sprintf("%s must not set runAsUser=0", [setters(pod_set, names)])
}
