# METADATA
# title: Sensitive workloads run on memory-encrypted nodes
# description: |
#   A workload labelled sensitive must require a node label that marks memory encryption
#   (AMD SEV-SNP, Intel TDX; by default under the admin-only node-restriction.kubernetes.io
#   prefix, which kubelets cannot set on their own node), or run in a confidential RuntimeClass.
# custom:
#   id: placement-encrypted-memory
#   severity: critical
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.7 data confidentiality"
#   remediation: Add nodeSelector {"<encrypted node label>": "true"} or a confidential runtimeClassName.
package vgate.rules.placement_encrypted_memory

import rego.v1

import data.vgate.lib.workload.is_sensitive
import data.vgate.lib.workload.judges_new_pods
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.required_node_terms
import data.vgate.lib.workload.sensitive_label
import data.vgate.lib.workload.templates

encrypted_labels := data.vgate.config.placement.encryptedNodeLabels

runtime_classes := data.vgate.config.placement.confidentialRuntimeClasses

selects_encrypted_node(spec) if {
	some label in encrypted_labels
	object.get(spec, ["nodeSelector", label], "") == "true"
}

term_requires_encryption(term) if {
	some expression in object.get(term, "matchExpressions", [])
	expression.key in encrypted_labels
	expression.operator == "In"
	count(expression.values) > 0
	every value in expression.values {
		value == "true"
	}
}

# Node selector terms are ORed: every term must require encryption.
selects_encrypted_node(spec) if {
	terms := required_node_terms(spec)
	count(terms) > 0
	every term in terms {
		term_requires_encryption(term)
	}
}

uses_confidential_runtime(spec) if spec.runtimeClassName in runtime_classes

deny contains {"rule": "placement-encrypted-memory", "msg": msg} if {
	judges_new_pods
	is_sensitive
	some name, template in templates
	not selects_encrypted_node(template.spec)
	not uses_confidential_runtime(template.spec)
	msg := sprintf(
		"%s is labelled %s but %s may run on a node without memory encryption: require one of the node labels %v with value \"true\" (nodeSelector or required node affinity), or set runtimeClassName to one of %v",
		[obj.kind, sensitive_label, name, encrypted_labels, runtime_classes],
	)
}
