# METADATA
# title: A Volcano Job's pods carry the Job's classification
# description: |
#   A Job labelled sensitive (or deny-egress) in its own metadata is sensitive as a whole: the pods
#   its tasks make must say so too, or bindings, the deny-egress NetworkPolicy and the report would
#   take them for ordinary pods. Mutation gives every task the labels it lacks; a task that says
#   otherwise (or still lacks one, when mutation did not run) is refused.
# custom:
#   severity: high
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Label every task's template as the Job is labelled, or remove the contrary label.
package vgate.rules.placement_classification_unit

import rego.v1

import data.vgate.lib.workload.is_create
import data.vgate.lib.workload.is_volcano_job
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.placement

restricting := {
	placement.sensitiveLabel.key: placement.sensitiveLabel.value,
	placement.egressDenyLabel.key: placement.egressDenyLabel.value,
}

deny contains msg if {
	is_create
	is_volcano_job
	some key, value in restricting
	object.get(obj, ["metadata", "labels", key], null) == value
	some i, task in obj.spec.tasks
	written := object.get(task, ["template", "metadata", "labels", key], null)
	written != value
	msg := sprintf(
		"Job: task[%d] %s: its pods would carry %s=%s where the Job is labelled %s=%s: label the task as the Job",
		[i, object.get(task, "name", ""), key, json.marshal(written), key, value],
	)
}
