# METADATA
# title: No custom SELinux user, role or type
# description: |
#   Pod Security Standards, baseline, "SELinux": seLinuxOptions (pod or container) may set the
#   level, and only the container types of the standard (container_t, container_init_t,
#   container_kvm_t; container_engine_t from v1.31); user and role must stay unset.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove seLinuxOptions.user and .role, and set .type only to one of the standard's container types.
#   pss:
#     check: SELinux
#     level: baseline
#     fields:
#       - spec.securityContext.seLinuxOptions
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.seLinuxOptions
package vgate.rules.security_selinux

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.pss.quoted
import data.vgate.lib.pss.setters

allowed_types := {"", "container_t", "container_init_t", "container_kvm_t"} if minor < 31

allowed_types := {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"} if minor >= 31

# What an seLinuxOptions object sets that the standard forbids: "type \"spc_t\"", "user \"root\"", ...
# Nothing, without a look at each field, when it is empty (as most pods' and containers' are): the
# RVM spent ~11 µs on the three lookups and checks of an empty one. Anything else, an object or not,
# is judged as before.
forbidden(options) := [] if options == {}

forbidden(options) := [sprintf("%s %q", [field, value]) |
	some field in ["type", "user", "role"]
	value := object.get(options, field, "")
	not allowed(field, value)
] if {
	options != {}
}

allowed("type", value) if value in allowed_types

allowed(field, "") if field in {"user", "role"}

deny contains failure(where, "seLinuxOptions", detail, "baseline") if {
	some where, group in container_groups
	pod_bad := forbidden(object.get(group.spec, ["securityContext", "seLinuxOptions"], {}))
	container_bad := [[c.name, bad] |
		some c in group.containers
		bad := forbidden(object.get(c, ["securityContext", "seLinuxOptions"], {}))
		count(bad) > 0
	]
	count(pod_bad) + count(container_bad) > 0
	values := sort({v | some v in pod_bad} | {v | some pair in container_bad; some v in pair[1]})
	detail := sprintf("%s set forbidden securityContext.seLinuxOptions: %s", [
		setters(count(pod_bad) > 0, [pair[0] | some pair in container_bad]), concat("; ", values),
	])
}
