# METADATA
# title: Memory limit within the queue's cap
# description: |
#   A queue may cap the memory limit of one container (maxMemoryLimit), so one job cannot take a
#   node's memory from the rest of its queue's gang.
# custom:
#   severity: medium
#   category: resources
#   control: "(no GB/T 22239-2019 control point: availability; GB/T 22239-2008 7.1.3.7 resource control)"
#   remediation: Lower resources.limits.memory to the queue's cap, or use a queue with a larger one.
package vgate.rules.resources_memory_limit_cap

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.queue
import data.vgate.lib.workload.resource_judged_containers

import data.vgate.lib.quantity.bytes as bytes_of

cap := data.vgate.config.queues.definitions[queue].maxMemoryLimit

# Each quantity converted once per evaluation (a conversion is most of this rule's cost): the cap,
# and each judged container's memory limit by its index among them (undefined if not a quantity).
_cap_bytes := bytes_of(cap)

_limit_bytes[index] := limit_bytes if {
	cap
	some index, judged in resource_judged_containers
	limit_bytes := bytes_of(judged.container.resources.limits.memory)
}

deny contains msg if {
	some index, limit_bytes in _limit_bytes
	limit_bytes > _cap_bytes
	judged := resource_judged_containers[index]
	limit := judged.container.resources.limits.memory
	msg := sprintf(
		"%s: container %s of %s has memory limit %v, above queue %q's cap of %s: lower it or use another queue",
		[obj.kind, judged.container.name, judged.where, limit, queue, cap],
	)
}

# A limit that is no Kubernetes quantity cannot be compared: refused, not let through.
deny contains msg if {
	cap
	some index, judged in resource_judged_containers
	limit := judged.container.resources.limits.memory
	not _limit_bytes[index]
	msg := sprintf(
		"%s: container %s of %s has memory limit %v, which is not a Kubernetes quantity: write it like 64Gi",
		[obj.kind, judged.container.name, judged.where, limit],
	)
}
