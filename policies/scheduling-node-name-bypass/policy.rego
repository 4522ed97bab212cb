# METADATA
# title: No nodeName set by the submitter
# description: |
#   A pod created with spec.nodeName skips the scheduler, so Volcano's queues, quotas, gang
#   scheduling and every placement rule enforced through node selection are bypassed.
# custom:
#   severity: high
#   category: scheduling
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove spec.nodeName; select nodes with nodeSelector or node affinity.
package vgate.rules.scheduling_node_name_bypass

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj

deny contains msg if {
	some judged in judged_specs
	node := object.get(judged.spec, "nodeName", "")
	node != ""
	msg := sprintf(
		concat(" ", [
			"%s: %s sets spec.nodeName %q, which bypasses the scheduler and",
			"its queue: remove nodeName and use nodeSelector or node affinity",
		]),
		[obj.kind, judged.where, node],
	)
}
