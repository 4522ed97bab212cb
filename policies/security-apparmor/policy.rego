# METADATA
# title: No AppArmor profile but the runtime's or a node's own
# description: |
#   Pod Security Standards, baseline, "AppArmor": a pod or container may not run Unconfined,
#   whether it says so in securityContext.appArmorProfile (pod or container) or in the older
#   container.apparmor.security.beta.kubernetes.io/<container> annotation (still read by the
#   kubelet and by pod-security admission).
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.4 intrusion prevention"
#   remediation: Set appArmorProfile.type to RuntimeDefault or Localhost (annotation runtime/default or
#     localhost/<profile>), or leave it unset.
#   pss:
#     check: AppArmor
#     level: baseline
#     fields:
#       - spec.securityContext.appArmorProfile.type
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.appArmorProfile.type
#       - metadata.annotations['container.apparmor.security.beta.kubernetes.io/*']
package vgate.rules.security_apparmor

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.quoted
import data.vgate.lib.pss.setters
import data.vgate.lib.workload.judged_specs

valid_types := {"RuntimeDefault", "Localhost"}

annotation_prefix := "container.apparmor.security.beta.kubernetes.io/"

# Where a pod's or a container's securityContext sets its profile type; unset counts as the runtime's default.
profile_type := ["securityContext", "appArmorProfile", "type"]

valid_annotation(value) if value in {"", "runtime/default"}

valid_annotation(value) if startswith(value, "localhost/")

deny contains failure(where, "forbidden AppArmor profile", detail, "baseline") if {
	some where, group in container_groups
	pod := object.get(group.spec, profile_type, "RuntimeDefault")
	bad := {type |
		some type in array.concat([pod], [object.get(c, profile_type, "RuntimeDefault") | some c in group.containers])
		not type in valid_types
	}
	count(bad) > 0
	names := [c.name | some c in group.containers; object.get(c, profile_type, "RuntimeDefault") in bad]
	detail := sprintf("%s must not set securityContext.appArmorProfile.type to %s", [
		setters(pod in bad, names), quoted(sort(bad)),
	])
}

deny contains failure(judged.where, "forbidden AppArmor profile", detail, "baseline") if {
	some judged in judged_specs
	bad := [sprintf("%s=%q", [key, value]) |
		some key, value in judged.metadata.annotations
		startswith(key, annotation_prefix)
		not valid_annotation(value)
	]
	count(bad) > 0
	detail := sprintf("forbidden annotations %s", [concat(", ", sort(bad))])
}
