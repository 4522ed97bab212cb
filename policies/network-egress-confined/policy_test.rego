package vgate.rules_test.network_egress_confined

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "network_egress_confined"

sensitive := {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}

with_egress(review, facts) := object.union(review, {"egress": facts})

test_denies_a_sensitive_pod_that_is_not_confined if {
	facts := {"pods": [{"pod": "ml-training/p", "confined": false, "reasons": ["NetworkPolicy ml-training/open egress[0] allows every destination (no `to`)"], "policies": ["ml-training/open"]}]}
	some violation in testing.denials(rule, with_egress(testing.pod(sensitive, testing.compliant_spec), facts))
	contains(violation, "sensitive pod ml-training/p of Pod  would reach outside the cluster: NetworkPolicy ml-training/open egress[0]")
}

test_allows_a_confined_sensitive_pod if {
	facts := {"pods": [{"pod": "ml-training/p", "confined": true, "reasons": [], "policies": ["ml-training/deny-egress"]}]}
	count(testing.denials(rule, with_egress(testing.pod(sensitive, testing.compliant_spec), facts))) == 0
}

test_denies_a_write_that_unconfines_admitted_pods if {
	policy := testing.review({"group": "networking.k8s.io", "version": "v1", "kind": "NetworkPolicy"}, "CREATE", "ml-training", {})
	facts := {"unconfines": [{"pods": ["ml-training/a", "ml-training/b"], "reason": "allows 0.0.0.0/0"}]}
	some violation in testing.denials(rule, with_egress(policy, facts))
	contains(violation, "would open a way outside the cluster for sensitive pods ml-training/a, ml-training/b: allows 0.0.0.0/0")
}

test_denies_an_exposing_service if {
	service := testing.review({"group": "", "version": "v1", "kind": "Service"}, "CREATE", "ml-training", {})
	some violation in testing.denials(rule, with_egress(service, {"exposes": ["ml-training/a"]}))
	contains(violation, "would make sensitive pods ml-training/a reachable from outside the cluster")
}

test_says_nothing_without_egress_facts if {
	count(testing.denials(rule, testing.pod(sensitive, testing.compliant_spec))) == 0
}
