# METADATA
# title: Priority class allowed for the queue
# description: |
#   A workload's priority class must be one its queue allows (allowedPriorityClasses, else the
#   queue's own priorityClass): a batch queue must not preempt inference by naming a higher class.
#   Kubernetes' own system-node-critical and system-cluster-critical are never denied: the Priority
#   admission plugin allows them in every namespace (limit them with a ResourceQuota scopeSelector,
#   as Kubernetes documents), and node agents such as device plugins and log shippers need them.
# custom:
#   severity: medium
#   category: scheduling
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove priorityClassName (vgate sets the queue's) or use one the queue allows.
package vgate.rules.scheduling_priority_class_allowed

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.is_create
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.queue

definition := data.vgate.config.queues.definitions[queue]

allowed := definition.allowedPriorityClasses

allowed := [definition.priorityClass] if not definition.allowedPriorityClasses

# The Priority admission plugin's built-in classes (scheduling.SystemPriorityClasses).
system_classes := {"system-node-critical", "system-cluster-critical"}

deny contains msg if {
	is_create
	class := object.get(obj.spec, "priorityClassName", "")
	class != ""
	not class in system_classes
	not class in allowed
	msg := sprintf(
		"%s in queue %q uses priority class %q; that queue allows %v: remove priorityClassName or use an allowed class",
		[obj.kind, queue, class, allowed],
	)
}
