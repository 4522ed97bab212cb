# METADATA
# title: Queue allowed for the namespace
# description: |
#   A workload may name its Volcano queue (pod annotation scheduling.volcano.sh/queue-name, or
#   spec.queue of a Volcano Job or PodGroup) only if the gateway config defines that queue and
#   lets the workload's namespace use it. vgate injects an allowed queue when none is named
#   (Volcano's `default`, which its CRDs fill in, counts as none). A queue that Volcano's PodGroup
#   webhook took from the namespace annotation is judged like any other: mirror the annotation in
#   queues.byNamespace so vgate injects it first (README, "In the admission chain").
# custom:
#   severity: medium
#   category: scheduling
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove the queue to get the namespace's queue, or name a queue allowed for the namespace.
package vgate.rules.scheduling_queue_allowed

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.is_create
import data.vgate.lib.workload.is_pod
import data.vgate.lib.workload.is_pod_group
import data.vgate.lib.workload.is_volcano_job
import data.vgate.lib.workload.named_queue
import data.vgate.lib.workload.obj

definitions := data.vgate.config.queues.definitions

namespace := input.request.namespace

judged if {
	is_create
	is_pod
}

judged if {
	is_create
	is_volcano_job
}

judged if {
	is_create
	is_pod_group
}

# An UPDATE that moves a workload to another queue (a PodGroup's or Volcano Job's spec.queue, a pod's
# queue annotation: each one the API server lets change) is judged like a CREATE naming it.
judged if {
	input.request.operation == "UPDATE"
	not input.request.subResource
	has_queue
	named_queue != queue_before
}

has_queue if is_pod

has_queue if is_volcano_job

has_queue if is_pod_group

queue_before := object.get(
	input.request,
	["oldObject", "metadata", "annotations", "scheduling.volcano.sh/queue-name"],
	"",
) if is_pod

queue_before := object.get(input.request, ["oldObject", "spec", "queue"], "") if not is_pod

allowed_queues := sort([name |
	some name, definition in definitions
	some pattern in definition.namespaces
	glob.match(pattern, [], namespace)
])

deny contains msg if {
	# regal ignore:pointless-reassignment
	queue := named_queue # binds it: with no queue named there is nothing to refuse, found before any message
	judged
	not definitions[queue]
	msg := sprintf(
		concat("", [
			"%s names Volcano queue %q, which the gateway does not know: use one of %v or name none ",
			"(a queue Volcano takes from the namespace's scheduling.volcano.sh/queue-name annotation must be ",
			"defined in queues.definitions and mapped in queues.byNamespace)",
		]),
		[obj.kind, queue, allowed_queues],
	)
}

deny contains msg if {
	judged
	definition := definitions[named_queue]
	not namespace_allowed(definition)
	msg := sprintf(
		"%s in namespace %q names Volcano queue %q, which that namespace may not use: use one of %v or name none",
		[obj.kind, namespace, named_queue, allowed_queues],
	)
}

namespace_allowed(definition) if {
	some pattern in definition.namespaces
	glob.match(pattern, [], namespace)
}
