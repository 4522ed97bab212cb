# METADATA
# title: workload helpers
# description: |
#   Where a Pod or a Volcano Job keeps its pod specs and labels, and whether it is sensitive.
#   Rules read these instead of walking the object themselves. Rules import the helpers they
#   use one by one (import data.vgate.lib.workload.is_sensitive): regorus evaluates a whole
#   package imported by its name, which costs ~0.2 ms per rule and request.
#   What is computed once per evaluation and shared by every rule (obj, judged_specs,
#   judged_containers, is_sensitive, named_queue) stays a rule over input: as a function taking
#   the object it would be computed again by each rule that calls it. Helpers that compute from
#   values they are given take them as arguments.
package vgate.lib.workload

import rego.v1

obj := input.request.object

placement := data.vgate.config.placement

is_create if input.request.operation == "CREATE"

is_pod if {
	input.request.kind.kind == "Pod"
	object.get(input.request.kind, "group", "") == ""
}

is_volcano_job if {
	input.request.kind.kind == "Job"
	input.request.kind.group == "batch.volcano.sh"
}

is_pod_group if {
	input.request.kind.kind == "PodGroup"
	input.request.kind.group == "scheduling.volcano.sh"
}

# Every pod spec a rule judges, with the name messages give it ("pod", "task[0] ps"), computed
# once per evaluation: rules iterate these instead of walking the object each again. Rules judge
# the pod specs of new pods and Volcano Jobs only: those fields of a running pod cannot change,
# and denying updates of pods admitted before a rule existed would block their finalizers.
default judged_specs := []

judged_specs := [{"where": "pod", "metadata": object.get(obj, "metadata", {}), "spec": obj.spec}] if {
	is_create
	is_pod
}

judged_specs := [{"where": where, "metadata": object.get(task.template, "metadata", {}), "spec": task.template.spec} |
	some i, task in obj.spec.tasks
	where := sprintf("task[%d] %s", [i, object.get(task, "name", "")])
] if {
	is_create
	is_volcano_job
}

# kubectl debug: an UPDATE of the pods/ephemeralcontainers subresource adds containers to a running
# pod. Its spec was judged at creation and cannot change, so only the added containers are judged.
is_ephemeral_update if {
	input.request.operation == "UPDATE"
	input.request.subResource == "ephemeralcontainers"
	is_pod
}

# Every container (init containers first) of every judged pod spec, with that spec; for kubectl
# debug, each ephemeral container the request adds, with the pod's spec.
judged_containers := [{"where": judged.where, "spec": judged.spec, "container": container} |
	some judged in judged_specs
	some container in containers(judged.spec)
] if not is_ephemeral_update

judged_containers := [{"where": "pod (ephemeral)", "spec": obj.spec, "container": container} |
	some container in object.get(obj.spec, "ephemeralContainers", [])
	not container.name in debugged_before
] if is_ephemeral_update

# An in-place resize (pods/resize, kubectl patch --subresource resize) changes a running pod's
# requests and limits: the resource rules judge every container's new resources.
is_resize if {
	input.request.operation == "UPDATE"
	input.request.subResource == "resize"
	is_pod
}

resource_judged_containers := judged_containers if not is_resize

resource_judged_containers := [{"where": "pod (resize)", "spec": obj.spec, "container": container} |
	some field in ["initContainers", "containers"]
	some container in object.get(obj.spec, field, [])
] if is_resize

# A pod UPDATE may add tolerations (the API server lets a running pod gain them, never lose them):
# the toleration rules judge the tolerations the request adds.
toleration_judged_specs := judged_specs if not is_pod_update

toleration_judged_specs := [{
	"where": "pod",
	"metadata": object.get(obj, "metadata", {}),
	"spec": {"tolerations": added},
}] if {
	is_pod_update
	before := object.get(input.request, ["oldObject", "spec", "tolerations"], [])
	added := [toleration | some toleration in object.get(obj.spec, "tolerations", []); not toleration in before]
	count(added) > 0
}

# A plain pod UPDATE (no subresource): what a tenant may change of a pod it created.
is_pod_update if {
	input.request.operation == "UPDATE"
	is_pod
	not input.request.subResource
}

# A pod UPDATE may change a container's image (the one container field a running pod lets change,
# kubectl set image): the image rules judge each container whose image the request changes.
is_pod_image_update if is_pod_update

image_judged_containers := judged_containers if not is_pod_image_update

image_judged_containers := [{"where": "pod", "spec": obj.spec, "container": container} |
	some field in ["initContainers", "containers"]
	some container in object.get(obj.spec, field, [])
	container.image != image_before(field, container.name)
] if is_pod_image_update

image_before(field, name) := container.image if {
	some container in object.get(input.request, ["oldObject", "spec", field], [])
	container.name == name
}

# Names of the ephemeral containers the pod had before this request.
debugged_before contains container.name if {
	some container in object.get(input.request, ["oldObject", "spec", "ephemeralContainers"], [])
}

labels_of(metadata) := object.get(metadata, "labels", {})

sensitive_label := sprintf("%s=%s", [placement.sensitiveLabel.key, placement.sensitiveLabel.value])

sensitive_key := placement.sensitiveLabel.key

is_sensitive if object.get(obj, ["metadata", "labels", sensitive_key], null) == placement.sensitiveLabel.value

is_sensitive if {
	is_volcano_job
	some task in obj.spec.tasks
	object.get(task, ["template", "metadata", "labels", sensitive_key], null) == placement.sensitiveLabel.value
}

required_node_terms(spec) := object.get(
	spec,
	["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"],
	[],
)

zone_label := placement.zoneLabel

# The zones a pod spec may land in: its nodeSelector's zone, and the zones of its required node
# affinity when every term names one (terms are ORed: one term without a zone pins nothing).
pinned_zones(spec) := selector_zones(spec) | affinity_zones(spec)

selector_zones(spec) := {zone | zone := object.get(spec, ["nodeSelector", zone_label], null); zone != null}

term_zones(term) := {value |
	some expression in object.get(term, "matchExpressions", [])
	expression.key == zone_label
	expression.operator == "In"
	count(expression.values) == 1
	some value in expression.values
}

affinity_zones(spec) := {zone | some term in required_node_terms(spec); some zone in term_zones(term)} if {
	terms := required_node_terms(spec)
	count(terms) > 0
	every term in terms {
		count(term_zones(term)) == 1
	}
} else := set()

containers(spec) := array.concat(object.get(spec, "initContainers", []), object.get(spec, "containers", []))

named_queue := obj.metadata.annotations["scheduling.volcano.sh/queue-name"] if is_pod

named_queue := obj.spec.queue if is_volcano_job

named_queue := obj.spec.queue if is_pod_group

# The queue a workload runs in, for every rule that judges by queue (caps, QoS, priority classes):
# the one it names, or, when it names none (empty, or Volcano's CRD default "default"), the one its
# namespace's Volcano annotation names (data.inventory, with cluster.watch), else the one the config
# assigns: queues.byNamespace, then the first queues.bySelector matching its labels, then
# queues.default, as vgate's mutation does. Nothing vgate writes (vgate.io/injected) is read: a
# pod that forged it, or that /mutate never saw, is judged by the same queue as one mutated.
queue := named_queue if _names_a_queue

queue := _configured_queue if not _names_a_queue

_names_a_queue if {
	# regal ignore:pointless-reassignment
	named := named_queue # binds it: with no named queue the rule is undefined (`not named_queue in` is not)
	not named in {"", "default"}
}

_queues := data.vgate.config.queues

# The request's Namespace as vgate's cluster state holds it (Gatekeeper's data.inventory shape):
# undefined without cluster.watch, in `vgate test`, or with a remote OPA not fed the inventory.
_namespace := data.inventory.cluster.v1.Namespace[input.request.namespace]

_namespace_queue := _namespace.metadata.annotations["scheduling.volcano.sh/queue-name"]

_configured_queue := _namespace_queue if {
	_namespace_queue != ""
} else := by_namespace if {
	by_namespace := object.get(_queues, "byNamespace", {})[input.request.namespace]
} else := selected if {
	selectors := object.get(_queues, "bySelector", [])
	selected := [rule.queue | some rule in selectors; label_selector_matches(rule.selector, _labels)][0]
} else := object.get(_queues, "default", "default")

_labels := object.get(obj, ["metadata", "labels"], {})

# A metav1.LabelSelector (matchLabels and matchExpressions); an empty selector matches everything.
label_selector_matches(selector, labels) if {
	every key, value in object.get(selector, "matchLabels", {}) {
		labels[key] == value
	}
	every expression in object.get(selector, "matchExpressions", []) {
		_holds(expression, labels)
	}
}

_holds(expression, labels) if {
	expression.operator == "In"
	labels[expression.key] in object.get(expression, "values", [])
}

# A missing key is NotIn any list. Through a helper: OPA evaluates labels[key] before the `not`, so
# `not labels[key] in values` would be undefined, not true, for a missing key (regorus: true).
_holds(expression, labels) if {
	expression.operator == "NotIn"
	not _label_in(labels, expression.key, object.get(expression, "values", []))
}

_holds(expression, labels) if {
	expression.operator == "Exists"
	_ := labels[expression.key]
}

_holds(expression, labels) if {
	expression.operator == "DoesNotExist"
	not _has(labels, expression.key)
}

_label_in(labels, key, values) if labels[key] in values

_has(labels, key) if _ := labels[key]

# The first entry whose namespace globs match `namespace` (config lists are ordered).
first_for_namespace(entries, namespace) := entries[index] if {
	indices := [i | some i, entry in entries; some pattern in entry.namespaces; glob.match(pattern, [], namespace)]
	index := indices[0]
}

image_of(container) := object.get(container, "image", "")

# Memory encryption: a required node label from placement.encryptedNodeLabels set to "true"
# (every required affinity term must require it), or a confidential RuntimeClass.
encrypted_labels := placement.encryptedNodeLabels

runtime_classes := placement.confidentialRuntimeClasses

selects_encrypted_node(spec) if {
	some label in encrypted_labels
	object.get(spec, ["nodeSelector", label], "") == "true"
}

# Node selector terms are ORed: every term must require encryption.
selects_encrypted_node(spec) if {
	terms := required_node_terms(spec)
	count(terms) > 0
	every term in terms {
		term_requires_encryption(term)
	}
}

term_requires_encryption(term) if {
	some expression in object.get(term, "matchExpressions", [])
	expression.key in encrypted_labels
	expression.operator == "In"
	count(expression.values) > 0
	every value in expression.values {
		value == "true"
	}
}

uses_confidential_runtime(spec) if spec.runtimeClassName in runtime_classes

runs_on_encrypted_memory(spec) if selects_encrypted_node(spec)

runs_on_encrypted_memory(spec) if uses_confidential_runtime(spec)

memory_devices := {"/dev/mem", "/dev/kmem", "/dev/port"}
