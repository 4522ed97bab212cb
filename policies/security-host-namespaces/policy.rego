# METADATA
# title: No host PID, IPC or network namespace
# description: |
#   hostPID lets a pod see and signal every process of the node, hostIPC share its memory
#   segments, hostNetwork bypass NetworkPolicy. Batch and AI workloads need none of them.
# custom:
#   id: security-host-namespaces
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove hostPID, hostIPC and hostNetwork from the pod spec.
package vgate.rules.security_host_namespaces

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj

host_fields := ["hostPID", "hostIPC", "hostNetwork"]

deny contains msg if {
	some judged in judged_specs
	some field in host_fields
	judged.spec[field] == true # any of them: the message lists them all (one message per spec)
	shared := [f | some f in host_fields; judged.spec[f] == true]
	msg := sprintf("%s: %s shares the node's %v: remove them from the pod spec", [obj.kind, judged.where, shared])
}
