# METADATA
# title: Memory limits where the queue requires a QoS class
# description: |
#   In a queue whose qosClass is Guaranteed or Burstable every container must have a memory
#   limit. vgate's mutation adds them; this catches workloads admitted while mutation was
#   unavailable (its failurePolicy is Ignore), which would otherwise run unbounded.
# custom:
#   severity: medium
#   category: resources
#   control: "(no GB/T 22239-2019 control point: availability; GB/T 22239-2008 7.1.3.7 resource control)"
#   remediation: Set resources.limits.memory on every container (or resubmit so vgate injects it).
package vgate.rules.resources_memory_limits_required

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.containers
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.queue

qos_class := data.vgate.config.queues.definitions[queue].qosClass

deny contains msg if {
	qos_class in {"Guaranteed", "Burstable"}
	some judged in judged_specs
	unbounded := [c.name | some c in containers(judged.spec); not c.resources.limits.memory]
	count(unbounded) > 0
	msg := sprintf(
		"%s: containers %v of %s have no memory limit, but queue %q runs %s workloads: set resources.limits.memory",
		[obj.kind, unbounded, judged.where, queue, qos_class],
	)
}
