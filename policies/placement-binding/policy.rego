# METADATA
# title: Pods are bound only where their constraints hold
# description: |
#   Where the scheduler (or anyone allowed to bind) actually puts a pod, checked at the binding
#   against the node as vgate's cluster state holds it (input.binding: the pod, the node, the pod's
#   PodGroup and where its other members already are). A sensitive pod goes only to a node whose
#   zone is known and is the zone it is pinned to, that carries a memory-encryption label (or the
#   pod runs in a confidential RuntimeClass), and in the zone its PodGroup's members already occupy:
#   a mislabelled node, a node that lost its label, a gang split across zones or a direct Binding
#   are refused and the scheduler tries again. No pod goes to a node dedicated to another tenant
#   (a PreferNoSchedule taint, which the scheduler may ignore, included).
# custom:
#   severity: critical
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Label the node (zone, memory encryption) or pin the pod to nodes that have them.
package vgate.rules.placement_binding

import rego.v1

import data.vgate.lib.workload.first_for_namespace
import data.vgate.lib.workload.pinned_zones
import data.vgate.lib.workload.placement
import data.vgate.lib.workload.sensitive_label
import data.vgate.lib.workload.zone_label

is_binding if {
	input.request.kind.kind == "Binding"
	object.get(input.request.kind, "group", "") == ""
}

pod := input.binding.pod

node := input.binding.node

node_labels := object.get(node, ["metadata", "labels"], {})

zone := node_labels[zone_label]

where := sprintf("pod %s/%s on node %s", [input.request.namespace, pod.metadata.name, node.metadata.name])

is_sensitive if {
	object.get(pod, ["metadata", "labels", placement.sensitiveLabel.key], null) == placement.sensitiveLabel.value
}

encrypted_node if {
	some key in placement.encryptedNodeLabels
	node_labels[key] == "true"
}

confidential_runtime if object.get(pod, ["spec", "runtimeClassName"], "") in placement.confidentialRuntimeClasses

taint_key := data.vgate.config.tenancy.dedicatedTaintKey

tenant := first_for_namespace(data.vgate.config.tenancy.namespaceTenants, input.request.namespace).tenant

tenant := "" if not first_for_namespace(data.vgate.config.tenancy.namespaceTenants, input.request.namespace)

deny contains msg if {
	is_binding
	is_sensitive
	not zone
	msg := sprintf(
		"Binding of %s: the pod is labelled %s and the node has no %s label",
		[where, sensitive_label, zone_label],
	)
}

deny contains msg if {
	is_binding
	is_sensitive
	zones := pinned_zones(pod.spec)
	count(zones) > 0
	not zone in zones
	msg := sprintf(
		"Binding of %s: the node is in zone %q, the pod (labelled %s) is pinned to %v",
		[where, object.get(node_labels, zone_label, ""), sensitive_label, sort(zones)],
	)
}

deny contains msg if {
	is_binding
	is_sensitive
	not encrypted_node
	not confidential_runtime
	msg := sprintf(
		concat(" ", [
			"Binding of %s: the pod is labelled %s and the node has none of the memory-encryption labels %v",
			"set to \"true\", and the pod's runtimeClassName is none of %v",
		]),
		[where, sensitive_label, placement.encryptedNodeLabels, placement.confidentialRuntimeClasses],
	)
}

deny contains msg if {
	is_binding
	is_sensitive
	some member in input.binding.members
	object.get(member, "zone", null) != object.get(node_labels, zone_label, null)
	msg := sprintf(
		"Binding of %s (zone %q) would split PodGroup %s across zones: its pod %s is already on node %s in zone %v",
		[
			where, object.get(node_labels, zone_label, ""),
			object.get(pod, ["metadata", "annotations", "scheduling.k8s.io/group-name"], ""),
			member.pod, member.node, json.marshal(object.get(member, "zone", null)),
		],
	)
}

deny contains msg if {
	is_binding
	some taint in object.get(node, ["spec", "taints"], [])
	taint.key == taint_key
	object.get(taint, "value", "") != tenant
	msg := sprintf(
		"Binding of %s: the node is dedicated to tenant %q (taint %s=%s:%s), namespace %q belongs to tenant %q",
		[
			where, object.get(taint, "value", ""), taint.key, object.get(taint, "value", ""), taint.effect,
			input.request.namespace, tenant,
		],
	)
}
