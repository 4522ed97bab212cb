# METADATA
# title: Memory limit within the queue's cap
# description: |
#   A queue may cap the memory limit of one container (maxMemoryLimit), so one job cannot take a
#   node's memory from the rest of its queue's gang.
# custom:
#   id: resources-memory-limit-cap
#   severity: medium
#   category: resources
#   control: "(no GB/T 22239-2019 control point: availability; GB/T 22239-2008 7.1.3.7 resource control)"
#   remediation: Lower resources.limits.memory to the queue's cap, or use a queue with a larger one.
package vgate.rules.resources_memory_limit_cap

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.named_queue
import data.vgate.lib.workload.obj

cap := data.vgate.config.queues.definitions[named_queue].maxMemoryLimit

deny contains msg if {
	some judged in judged_containers
	limit := judged.container.resources.limits.memory
	units.parse_bytes(limit) > units.parse_bytes(cap)
	msg := sprintf(
		"%s: container %s of %s has memory limit %s, above queue %q's cap of %s: lower it or use another queue",
		[obj.kind, judged.container.name, judged.where, limit, named_queue, cap],
	)
}
