# METADATA
# title: A pod's classification is fixed when it is created
# description: |
#   Where a sensitive pod may run and what it may reach are judged when it is created and bound:
#   its node selector against the zone and encryption rules, its binding against the node's
#   facts, its effective egress against the NetworkPolicies. A label UPDATE of a running pod
#   would skip all of that: removing the sensitive or deny-egress label takes it out of the
#   deny-egress policy and the report (kubectl label pod X vgate.io/egress-), and adding the
#   sensitive label to a pod already running on an unencrypted node makes the report call it
#   sensitive where no rule judged it. A plain pod UPDATE may not change either label; delete
#   the pod and create it again with the labels it needs. A PodGroup's zone label, which its
#   sensitive members are pinned to when they are created, may not change either.
# custom:
#   severity: high
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.3.1 boundary protection"
#   remediation: Recreate the pod (or roll its controller) with the classification it needs.
package vgate.rules.placement_classification_fixed

import rego.v1

import data.vgate.lib.workload.is_pod_group
import data.vgate.lib.workload.is_pod_update
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.placement
import data.vgate.lib.workload.zone_label

fixed := [placement.sensitiveLabel.key, placement.egressDenyLabel.key]

label_of(pod, key) := object.get(pod, ["metadata", "labels", key], null)

deny contains msg if {
	is_pod_update
	some key in fixed
	before := label_of(input.request.oldObject, key)
	after := label_of(obj, key)
	before != after
	msg := sprintf(
		"Pod %s: the %s label of a running pod cannot change (%s to %s): recreate the pod with it",
		[obj.metadata.name, key, json.marshal(before), json.marshal(after)],
	)
}

deny contains msg if {
	is_pod_group
	input.request.operation == "UPDATE"
	before := label_of(input.request.oldObject, zone_label)
	after := label_of(obj, zone_label)
	before != after
	msg := sprintf(
		"PodGroup %s: its %s label cannot change (%s to %s): its members were pinned to it; create another",
		[obj.metadata.name, zone_label, json.marshal(before), json.marshal(after)],
	)
}
