package vgate.rules_test.placement_binding

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_binding"

node_b := object.union(testing.encrypted_node_a, {"topology.kubernetes.io/zone": "zone-b"})

test_allows_sensitive_pod_on_encrypted_node_in_its_zone if {
	count(testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, testing.encrypted_node_a, [], []))) == 0
}

test_allows_ordinary_pod_anywhere_untainted if {
	count(testing.denials(rule, testing.binding({}, {}, {}, [], [{"pod": "q", "node": "n", "zone": "zone-b"}]))) == 0
}

test_denies_node_without_zone_label if {
	labels := {"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"}
	some violation in testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, labels, [], []))
	contains(violation, "the node has no topology.kubernetes.io/zone label")
}

test_denies_node_in_another_zone_than_pinned if {
	some violation in testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, node_b, [], []))
	contains(violation, `the node is in zone "zone-b", the pod (labelled vgate.io/data-classification=sensitive) is pinned to ["zone-a"]`)
}

test_denies_node_that_lost_its_encryption_label if {
	labels := {"topology.kubernetes.io/zone": "zone-a"}
	some violation in testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, labels, [], []))
	contains(violation, "none of the memory-encryption labels")
}

test_denies_encryption_label_not_true if {
	labels := object.union(testing.encrypted_node_a, {"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "false"})
	some violation in testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, labels, [], []))
	contains(violation, "none of the memory-encryption labels")
}

test_allows_confidential_runtime_on_plain_node if {
	spec := {"runtimeClassName": "kata-qemu-snp", "nodeSelector": {"topology.kubernetes.io/zone": "zone-a"}}
	denied := testing.denials(rule, testing.binding(testing.sensitive, spec, {"topology.kubernetes.io/zone": "zone-a"}, [], []))
	count(denied) == 0
}

test_denies_splitting_a_pod_group_across_zones if {
	members := [{"pod": "p-0", "node": "zone-a-sev-1", "zone": "zone-a"}]
	spec := {"nodeSelector": {"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"}}
	some violation in testing.denials(rule, testing.binding(testing.sensitive, spec, node_b, [], members))
	contains(violation, `would split PodGroup g across zones: its pod p-0 is already on node zone-a-sev-1 in zone "zone-a"`)
}

test_allows_joining_members_in_the_same_zone if {
	members := [{"pod": "p-0", "node": "zone-a-sev-1", "zone": "zone-a"}]
	count(testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, testing.encrypted_node_a, [], members))) == 0
}

test_denies_member_on_a_node_of_unknown_zone if {
	members := [{"pod": "p-0", "node": "gone", "zone": null}]
	some violation in testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, testing.encrypted_node_a, [], members))
	contains(violation, "would split PodGroup g")
}

test_denies_node_dedicated_to_another_tenant if {
	taints := [{"key": "dedicated", "value": "serving", "effect": "PreferNoSchedule"}]
	some violation in testing.denials(rule, testing.binding({}, {}, testing.encrypted_node_a, taints, []))
	contains(violation, `dedicated to tenant "serving" (taint dedicated=serving:PreferNoSchedule), namespace "ml-training" belongs to tenant "research"`)
}

test_allows_node_dedicated_to_own_tenant if {
	taints := [{"key": "dedicated", "value": "research", "effect": "NoSchedule"}]
	count(testing.denials(rule, testing.binding(testing.sensitive, testing.compliant_spec, testing.encrypted_node_a, taints, []))) == 0
}

test_other_rules_leave_bindings_alone if {
	every name in object.keys(data.vgate.rules) - {rule} {
		count(testing.denials(name, testing.binding(testing.sensitive, {}, {}, [], []))) == 0
	}
}
