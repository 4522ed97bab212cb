# METADATA
# title: Probes and lifecycle hooks only on the pod itself
# description: |
#   Pod Security Standards, baseline, "Host Probes / Lifecycle Hooks" (v1.34+): a probe or
#   lifecycle hook with a host makes the kubelet connect from the node to any address, on the
#   pod's behalf: a way past NetworkPolicies to the node's and the cluster's services.
# custom:
#   severity: medium
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.3.2 access control"
#   remediation: Remove host from the probe's or hook's httpGet and tcpSocket; the kubelet then targets the pod's IP.
#   pss:
#     check: Host Probes / Lifecycle Hooks
#     level: baseline
#     fields:
#       - "spec.{initContainers,containers,ephemeralContainers}[*]\
#         .{livenessProbe,readinessProbe,startupProbe}.{httpGet,tcpSocket}.host"
#       - spec.{initContainers,containers,ephemeralContainers}[*].lifecycle.{postStart,preStop}.{httpGet,tcpSocket}.host
package vgate.rules.security_host_probes

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.containers_named
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.pss.plural
import data.vgate.lib.pss.quoted
import data.vgate.lib.pss.uses

handler_paths := [
	["livenessProbe"], ["readinessProbe"], ["startupProbe"],
	["lifecycle", "postStart"], ["lifecycle", "preStop"],
]

# The handlers a container sets are looked up first, and only those for a host: most containers set
# one or two of the five, and ten lookups of concatenated full paths cost the RVM ~12 µs more a container.
# A handler that is not an object has no host, as a full path through it had none.
hosts(container) := {host |
	some path in handler_paths
	handler := object.get(container, path, null)
	is_object(handler)
	some action in ["httpGet", "tcpSocket"]
	host := object.get(handler, [action, "host"], "")
	host != ""
}

deny contains failure(where, "probe or lifecycle host", detail, "baseline") if {
	minor >= 34
	some where, group in container_groups
	names := [c.name | some c in group.containers; count(hosts(c)) > 0]
	count(names) > 0
	used := sort({h | some c in group.containers; some h in hosts(c)})
	detail := sprintf("%s %s %s %s", [
		containers_named(names), uses(names),
		plural("probe or lifecycle host", used), quoted(used),
	])
}
