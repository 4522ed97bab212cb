# METADATA
# title: Volcano schedules Volcano-managed namespaces
# description: |
#   In namespaces the config marks as Volcano-scheduled, a workload may not name another
#   scheduler: queues, fair share and gang scheduling only hold if Volcano places every pod.
#   Schedulers that Volcano's own resource groups assign are listed in volcano.allowedSchedulers.
# custom:
#   severity: medium
#   category: scheduling
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove schedulerName (vgate sets volcano) or set it to volcano.
package vgate.rules.scheduling_volcano_scheduler

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.is_create
import data.vgate.lib.workload.is_pod
import data.vgate.lib.workload.is_volcano_job
import data.vgate.lib.workload.obj

volcano := data.vgate.config.volcano

volcano_managed if {
	some pattern in volcano.namespaces
	glob.match(pattern, [], input.request.namespace)
}

judged if {
	is_create
	is_pod
}

judged if {
	is_create
	is_volcano_job
}

deny contains msg if {
	judged
	scheduler := object.get(obj.spec, "schedulerName", "")
	not scheduler in {"", volcano.schedulerName}
	not scheduler in volcano.allowedSchedulers
	volcano_managed # last: matching namespace globs costs more than the checks above
	msg := sprintf(
		"%s in namespace %q names scheduler %q, but Volcano schedules that namespace: remove schedulerName or set it to %q",
		[obj.kind, input.request.namespace, scheduler, volcano.schedulerName],
	)
}
