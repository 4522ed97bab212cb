# METADATA
# title: Run as non-root
# description: |
#   Pod Security Standards, restricted, "Running as Non-root": runAsNonRoot: true on the pod or
#   on every container, so the kubelet refuses to start an image whose user is root. Pods with
#   their own user namespace (hostUsers: false) are exempt from v1.35: root there is not the
#   node's root.
# custom:
#   severity: medium
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Set spec.securityContext.runAsNonRoot to true (and run the image as a non-zero uid).
#   pss:
#     check: Running as Non-root
#     level: restricted
#     fields:
#       - spec.securityContext.runAsNonRoot
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.runAsNonRoot
package vgate.rules.security_run_as_non_root

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.setters
import data.vgate.lib.pss.user_namespace_relaxed

setting(context) := object.get(context, "runAsNonRoot", null)

# Pod or containers explicitly false.
deny contains failure(where, "runAsNonRoot != true", detail, "restricted") if {
	some where, group in container_groups
	pod_set := setting(object.get(group.spec, "securityContext", {})) == false
	names := [c.name | some c in group.containers; setting(object.get(c, "securityContext", {})) == false]
	true in [pod_set, count(names) > 0]
	not user_namespace_relaxed(group.spec)
	detail := sprintf("%s must not set securityContext.runAsNonRoot=false", [setters(pod_set, names)])
}

# Nothing explicitly false, but neither the pod nor every container says true.
deny contains failure(where, "runAsNonRoot != true", detail, "restricted") if {
	some where, group in container_groups
	pod := setting(object.get(group.spec, "securityContext", {}))
	pod != false
	every c in group.containers {
		setting(object.get(c, "securityContext", {})) != false
	}
	names := [c.name | some c in group.containers; setting(object.get(c, "securityContext", {})) == null; pod != true]
	count(names) > 0
	not user_namespace_relaxed(group.spec)
	detail := sprintf("pod or %s must set securityContext.runAsNonRoot=true", [containers_named(names)])
}
