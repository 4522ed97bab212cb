package vgate.rules_test.node_facts_admin_only

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "node_facts_admin_only"

zone_b_sev := {"topology.kubernetes.io/zone": "zone-b", "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"}

node(labels, taints) := {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "zone-b-sev-1", "labels": labels}, "spec": {"taints": taints}}

# An UPDATE of Node zone-b-sev-1 from `old` to `new` by `user`.
update(user, old, new) := json.patch(testing.review({"group": "", "version": "v1", "kind": "Node"}, "UPDATE", "", new), [
	{"op": "add", "path": "/request/oldObject", "value": old},
	{"op": "add", "path": "/request/userInfo", "value": {"username": user, "groups": ["system:nodes"]}},
])

moved := object.union(zone_b_sev, {"topology.kubernetes.io/zone": "zone-a"})

test_denies_a_node_moving_itself_into_another_zone if {
	some violation in testing.denials(rule, update("system:node:zone-b-sev-1", node(zone_b_sev, []), node(moved, [])))
	contains(violation, `system:node:zone-b-sev-1 may not change the node's own topology.kubernetes.io/zone label ("zone-b" to "zone-a")`)
}

test_denies_a_node_giving_itself_an_encryption_label if {
	plain := {"topology.kubernetes.io/zone": "zone-b"}
	some violation in testing.denials(rule, update("system:node:zone-b-sev-1", node(plain, []), node(zone_b_sev, [])))
	contains(violation, `cpu-security.sev.snp.enabled label (null to "true")`)
}

test_denies_a_node_removing_its_tenant_taint if {
	taint := {"key": "dedicated", "value": "serving", "effect": "NoSchedule"}
	some violation in testing.denials(rule, update("system:node:gpu-1", node(zone_b_sev, [taint]), node(zone_b_sev, [])))
	contains(violation, `tenant taint dedicated (["dedicated=serving:NoSchedule"] to [])`)
}

test_allows_an_admin_moving_a_node if {
	count(testing.denials(rule, update("kubernetes-admin", node(zone_b_sev, []), node(moved, [])))) == 0
}

test_allows_a_node_changing_other_labels_and_taints if {
	relabelled := object.union(zone_b_sev, {"kubernetes.io/hostname": "zone-b-sev-1"})
	other := [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
	count(testing.denials(rule, update("system:node:zone-b-sev-1", node(zone_b_sev, []), node(relabelled, other)))) == 0
}
