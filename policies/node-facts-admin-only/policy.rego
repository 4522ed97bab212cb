# METADATA
# title: A node's placement facts are an admin's, not the node's
# description: |
#   Where sensitive work may run is read from each node's zone label, its memory-encryption
#   labels and its tenant taint. NodeRestriction lets a kubelet set topology.kubernetes.io/zone on
#   its own Node, so one compromised node could move itself into another datacenter's zone and
#   attract its sensitive work. A Node UPDATE by a node's own identity (system:node:<name>) that
#   changes any of these facts is refused; an admin's change is allowed, and recorded like every
#   decision. The cloud controller manager, which sets zones in clouds, acts as an admin here.
# custom:
#   severity: critical
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: An admin sets the node's zone, memory-encryption labels and tenant taint; not the kubelet.
package vgate.rules.node_facts_admin_only

import rego.v1

import data.vgate.lib.workload.placement
import data.vgate.lib.workload.zone_label

user := object.get(input.request, ["userInfo", "username"], "")

is_node_update_by_a_node if {
	input.request.kind.kind == "Node"
	object.get(input.request.kind, "group", "") == ""
	input.request.operation == "UPDATE"
	startswith(user, "system:node:")
}

node := input.request.object

before := object.get(input.request, "oldObject", {})

fact_labels := {zone_label} | {key | some key in placement.encryptedNodeLabels}

taint_key := data.vgate.config.tenancy.dedicatedTaintKey

tenant_taints(obj) := {sprintf("%s=%s:%s", [t.key, object.get(t, "value", ""), t.effect]) |
	some t in object.get(obj, ["spec", "taints"], [])
	t.key == taint_key
}

label_of(obj, key) := object.get(obj, ["metadata", "labels", key], null)

deny contains msg if {
	is_node_update_by_a_node
	some key in fact_labels
	label_of(before, key) != label_of(node, key)
	msg := sprintf(
		"Node %s: %s may not change the node's own %s label (%s to %s): an admin sets where work may run",
		[node.metadata.name, user, key, json.marshal(label_of(before, key)), json.marshal(label_of(node, key))],
	)
}

deny contains msg if {
	is_node_update_by_a_node
	tenant_taints(before) != tenant_taints(node)
	msg := sprintf(
		"Node %s: %s may not change the node's own tenant taint %s (%v to %v): an admin dedicates nodes to tenants",
		[node.metadata.name, user, taint_key, sort(tenant_taints(before)), sort(tenant_taints(node))],
	)
}
