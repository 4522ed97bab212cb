# METADATA
# title: The default /proc mount
# description: |
#   Pod Security Standards "/proc Mount Type": the default /proc masks hide the node's kernel
#   interfaces. Baseline: procMount must be Default or unset, except (from v1.35) in a pod with
#   its own user namespace (hostUsers: false). Restricted (v1.35+): Default or unset, always.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove securityContext.procMount or set it to Default.
#   pss:
#     check: /proc Mount Type
#     level: baseline and restricted
#     fields:
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.procMount
package vgate.rules.security_proc_mount

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.pss.quoted
import data.vgate.lib.pss.user_namespace_relaxed

unmasked(group) := [c |
	some c in group.containers
	object.get(c, ["securityContext", "procMount"], "Default") != "Default"
]

detail(bad) := sprintf("%s must not set securityContext.procMount to %s", [
	containers_named([c.name | some c in bad]),
	quoted(sort({c.securityContext.procMount | some c in bad})),
])

deny contains failure(where, "procMount", detail(bad), "baseline") if {
	some where, group in container_groups
	bad := unmasked(group)
	count(bad) > 0
	not user_namespace_relaxed(group.spec)
}

deny contains failure(where, "procMount", detail(bad), "restricted") if {
	minor >= 35
	some where, group in container_groups
	bad := unmasked(group)
	count(bad) > 0
	user_namespace_relaxed(group.spec)
}
