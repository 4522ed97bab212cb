# METADATA
# title: A gang that can be scheduled
# description: |
#   A Volcano Job whose minAvailable exceeds the sum of its tasks' replicas (or a task whose
#   minAvailable exceeds its replicas) waits forever: the gang can never be complete, and its
#   pods hold quota in the queue while pending.
# custom:
#   severity: medium
#   category: scheduling
#   control: "(no GB/T 22239-2019 control point: availability; GB/T 22239-2008 7.1.3.7 resource control)"
#   remediation: Lower minAvailable to at most the total replicas, or add replicas.
package vgate.rules.volcano_gang_min_available

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.is_create
import data.vgate.lib.workload.is_volcano_job
import data.vgate.lib.workload.obj

tasks := object.get(obj.spec, "tasks", [])

replicas := sum([object.get(task, "replicas", 0) | some task in tasks])

deny contains msg if {
	is_volcano_job
	is_create
	obj.spec.minAvailable > replicas
	msg := sprintf(
		concat(" ", [
			"Job minAvailable %d exceeds its %d replicas in all tasks, so",
			"the gang can never start: lower minAvailable or add replicas",
		]),
		[obj.spec.minAvailable, replicas],
	)
}

deny contains msg if {
	is_volcano_job
	is_create
	some task in tasks
	task.minAvailable > object.get(task, "replicas", 0)
	msg := sprintf(
		"task %s minAvailable %d exceeds its %d replicas: lower minAvailable or add replicas",
		[task.name, task.minAvailable, object.get(task, "replicas", 0)],
	)
}
