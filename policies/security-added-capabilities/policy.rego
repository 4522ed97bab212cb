# METADATA
# title: Linux capabilities within the standard
# description: |
#   Pod Security Standards "Capabilities". Baseline: a container may add only the default
#   capabilities a container runtime grants anyway (AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER,
#   FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT), or those
#   of security.allowedCapabilities when set (stricter or looser, on purpose). Restricted (v1.22+,
#   Windows pods exempt from v1.25): every container drops ALL and adds at most NET_BIND_SERVICE.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove the capability from securityContext.capabilities.add; for restricted, set
#     capabilities.drop to ["ALL"].
#   pss:
#     check: Capabilities
#     level: baseline and restricted
#     fields:
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.capabilities.{add,drop}
package vgate.rules.security_added_capabilities

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.pss.quoted
import data.vgate.lib.pss.windows_exempt

configured := data.vgate.config.security.allowedCapabilities

# pod-security admission's capabilities_allowed_1_0 (unchanged through v1.37), unless the config names others.
default allowed := {
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
	"SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

allowed := {c | some c in configured} if is_array(configured)

added(container) := {c | some c in object.get(container, ["securityContext", "capabilities", "add"], [])}

deny contains failure(where, "non-default capabilities", concat("; ", parts), "baseline") if {
	some where, group in container_groups
	parts := [added_part(c.name, extra) |
		some c in group.containers
		extra := added(c) - allowed
		count(extra) > 0
	]
	count(parts) > 0
}

# Restricted: what the baseline result above does not already say.
deny contains failure(where, "unrestricted capabilities", concat("; ", parts), "restricted") if {
	minor >= 22
	some where, group in container_groups
	undropped := [c.name |
		some c in group.containers
		not "ALL" in object.get(c, ["securityContext", "capabilities", "drop"], [])
	]
	beyond := [added_part(c.name, extra) |
		some c in group.containers
		extra := (added(c) & allowed) - {"NET_BIND_SERVICE"}
		count(extra) > 0
	]
	parts := array.concat(drop_all_part(undropped), beyond)
	count(parts) > 0
	not windows_exempt(group.spec)
}

added_part(name, extra) := sprintf("container %q must not include %s in securityContext.capabilities.add", [
	name, quoted(sort(extra)),
])

# (A helper, not a comprehension without iteration: the RVM finds an empty one of those undefined.)
drop_all_part(names) := [] if count(names) == 0

drop_all_part(names) := [sprintf(`%s must set securityContext.capabilities.drop=["ALL"]`, [
	containers_named(names),
])] if {
	count(names) > 0
}
