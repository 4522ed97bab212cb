# METADATA
# title: No host PID, IPC or network namespace
# description: |
#   Pod Security Standards, baseline, "Host Namespaces": a pod sharing the node's process, IPC or
#   network namespace sees and reaches every other workload on the node.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove hostNetwork, hostPID and hostIPC from the pod spec.
#   pss: {check: Host Namespaces, level: baseline, fields: [spec.hostNetwork, spec.hostPID, spec.hostIPC]}
package vgate.rules.security_host_namespaces

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.failure
import data.vgate.lib.workload.judged_specs

host_fields := ["hostNetwork", "hostPID", "hostIPC"]

deny contains failure(judged.where, "host namespaces", concat(", ", shared), "baseline") if {
	some judged in judged_specs
	shared := [sprintf("%s=true", [field]) | some field in host_fields; judged.spec[field] == true]
	count(shared) > 0
}
