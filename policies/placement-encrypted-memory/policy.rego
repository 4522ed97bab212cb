# METADATA
# title: Sensitive workloads run on memory-encrypted nodes
# description: |
#   A workload labelled sensitive must require a node label that marks memory encryption
#   (AMD SEV-SNP, Intel TDX; by default under the admin-only node-restriction.kubernetes.io
#   prefix, which kubelets cannot set on their own node), or run in a confidential RuntimeClass.
# custom:
#   severity: critical
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.8 data confidentiality"
#   remediation: "Add nodeSelector {\"<encrypted node label>\": \"true\"} or a confidential runtimeClassName."
package vgate.rules.placement_encrypted_memory

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.is_sensitive
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.placement
import data.vgate.lib.workload.runs_on_encrypted_memory
import data.vgate.lib.workload.sensitive_label

deny contains msg if {
	is_sensitive
	some judged in judged_specs
	not runs_on_encrypted_memory(judged.spec)
	msg := sprintf(
		concat(" ", [
			"%s is labelled %s but %s may run on a node without memory encryption: require one of the node labels",
			"%v with value \"true\" (nodeSelector or required node affinity), or set runtimeClassName to one of %v",
		]),
		[obj.kind, sensitive_label, judged.where, placement.encryptedNodeLabels, placement.confidentialRuntimeClasses],
	)
}
