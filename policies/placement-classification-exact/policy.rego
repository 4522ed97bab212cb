# METADATA
# title: Classification labels are written exactly as configured
# description: |
#   The sensitive label and the deny-egress label are compared exactly, as Kubernetes compares
#   label values in selectors. A near miss (vgate.io/data-classification=Sensitive, "SENSITIVE",
#   egress=Deny) would make a workload its owner meant as sensitive an ordinary one to every other
#   rule, to the deny-egress NetworkPolicy and to the report: it is refused with the value to write.
# custom:
#   severity: high
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Write the label value exactly as placement.sensitiveLabel and placement.egressDenyLabel name it.
package vgate.rules.placement_classification_exact

import rego.v1

import data.vgate.lib.workload.is_create
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.placement

labelled := [{"where": obj.kind, "labels": object.get(obj, ["metadata", "labels"], {})}] if is_create

labelled_specs := [{"where": sprintf("%s %s", [obj.kind, judged.where]), "labels": labels} |
	some judged in judged_specs
	judged.where != "pod"
	labels := object.get(judged.metadata, "labels", {})
]

exact := {
	placement.sensitiveLabel.key: placement.sensitiveLabel.value,
	placement.egressDenyLabel.key: placement.egressDenyLabel.value,
}

deny contains msg if {
	some found in array.concat(labelled, labelled_specs)
	some key, value in exact
	written := found.labels[key]
	written != value
	lower(trim_space(written)) == lower(value)
	msg := sprintf(
		"%s: label %s=%q is not %q as vgate and the cluster compare labels (exactly): write %s=%s",
		[found.where, key, written, value, key, value],
	)
}
