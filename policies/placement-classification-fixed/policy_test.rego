package vgate.rules_test.placement_classification_fixed

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_classification_fixed"

sensitive := {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}

# A plain UPDATE of pod p from labels `old` to labels `new`.
relabel(old, new) := json.patch(testing.as_update(testing.pod(new, testing.compliant_spec)), [{
	"op": "add", "path": "/request/oldObject",
	"value": testing.pod(old, testing.compliant_spec).request.object,
}])

test_denies_removing_the_egress_label_from_a_running_sensitive_pod if {
	some violation in testing.denials(rule, relabel(sensitive, {"vgate.io/data-classification": "sensitive"}))
	contains(violation, `the vgate.io/egress label of a running pod cannot change ("deny" to null)`)
}

test_denies_relabelling_a_sensitive_pod_public if {
	public := object.union(sensitive, {"vgate.io/data-classification": "public"})
	some violation in testing.denials(rule, relabel(sensitive, public))
	contains(violation, `the vgate.io/data-classification label of a running pod cannot change ("sensitive" to "public")`)
}

test_denies_labelling_a_running_pod_sensitive if {
	some violation in testing.denials(rule, relabel({}, {"vgate.io/data-classification": "sensitive"}))
	contains(violation, `(null to "sensitive")`)
}

test_allows_other_label_changes if {
	count(testing.denials(rule, relabel(sensitive, object.union(sensitive, {"team": "a"})))) == 0
}

test_allows_creating_a_sensitive_pod if {
	count(testing.denials(rule, testing.pod(sensitive, testing.compliant_spec))) == 0
}

group(labels) := {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "ml-training", "labels": labels}, "spec": {"minMember": 2}}

regroup(old, new) := json.patch(
	testing.review({"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "PodGroup"}, "UPDATE", "ml-training", group(new)),
	[{"op": "add", "path": "/request/oldObject", "value": group(old)}],
)

test_denies_moving_a_pod_groups_zone if {
	some violation in testing.denials(rule, regroup({"topology.kubernetes.io/zone": "zone-a"}, {"topology.kubernetes.io/zone": "zone-b"}))
	contains(violation, `PodGroup g: its topology.kubernetes.io/zone label cannot change ("zone-a" to "zone-b")`)
}

test_allows_a_pod_groups_other_labels_to_change if {
	count(testing.denials(rule, regroup({"topology.kubernetes.io/zone": "zone-a"}, {"topology.kubernetes.io/zone": "zone-a", "team": "x"}))) == 0
}
