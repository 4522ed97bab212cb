# METADATA
# title: Seccomp on
# description: |
#   Pod Security Standards "Seccomp". Baseline: no pod or container may run Unconfined
#   (securityContext.seccompProfile.type; below policy v1.19, the seccomp.security.alpha.kubernetes.io
#   annotations instead). Restricted (v1.19+; Windows pods exempt from v1.25): the pod, or else
#   every container, sets RuntimeDefault or Localhost explicitly.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.4 intrusion prevention"
#   remediation: Set spec.securityContext.seccompProfile.type to RuntimeDefault (or Localhost with a profile).
#   pss:
#     check: Seccomp
#     level: baseline and restricted
#     fields:
#       - spec.securityContext.seccompProfile.type
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.seccompProfile.type
#       - metadata.annotations['seccomp.security.alpha.kubernetes.io/pod']
#       - metadata.annotations['container.seccomp.security.alpha.kubernetes.io/*']
package vgate.rules.security_seccomp

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.pss.quoted
import data.vgate.lib.pss.setters
import data.vgate.lib.pss.windows_exempt
import data.vgate.lib.workload.judged_specs

valid_types := {"RuntimeDefault", "Localhost"}

profile_type := ["securityContext", "seccompProfile", "type"]

# The alpha annotations, judged below v1.19.
forbidden_annotations(bad) := sprintf("forbidden annotations %s", [concat(", ", sort(bad))])

annotation_pod := "seccomp.security.alpha.kubernetes.io/pod"

annotation_container_prefix := "container.seccomp.security.alpha.kubernetes.io/"

valid_annotation(value) if value in {"runtime/default", "docker/default"}

valid_annotation(value) if startswith(value, "localhost/")

seccomp_annotation(key) if key == annotation_pod

seccomp_annotation(key) if startswith(key, annotation_container_prefix)

# Baseline from v1.19: nothing explicitly Unconfined (or any other type). The types are read once per
# spec (each call costs the RVM a few µs); most pods set none, and their check ends at the count.
deny contains failure(where, "seccompProfile", detail, "baseline") if {
	minor >= 19
	some where, group in container_groups
	pod := object.get(group.spec, profile_type, "")
	bad := {type |
		some type in array.concat([pod], [object.get(c, profile_type, "") | some c in group.containers])
		type != ""
		not type in valid_types
	}
	count(bad) > 0
	names := [c.name | some c in group.containers; object.get(c, profile_type, "") in bad]
	detail := sprintf("%s must not set securityContext.seccompProfile.type to %s", [
		setters(pod in bad, names), quoted(sort(bad)),
	])
}

# Baseline below v1.19: the alpha annotations.
deny contains failure(judged.where, "seccompProfile", forbidden_annotations(bad), "baseline") if {
	minor < 19
	some judged in judged_specs
	bad := [sprintf("%s=%q", [key, value]) |
		some key, value in judged.metadata.annotations
		seccomp_annotation(key)
		not valid_annotation(value)
	]
	count(bad) > 0
}

# Restricted: set, not merely not Unconfined. What baseline refuses is not said twice: a pod-level
# type that is neither valid nor explicitly bad is "" (unset).
deny contains failure(where, "seccompProfile", detail, "restricted") if {
	minor >= 19
	some where, group in container_groups
	object.get(group.spec, profile_type, "") == ""
	names := [c.name | some c in group.containers; object.get(c, profile_type, "") == ""]
	count(names) > 0
	not windows_exempt(group.spec)
	detail := sprintf("pod or %s must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"", [
		containers_named(names),
	])
}
