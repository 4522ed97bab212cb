package vgate.rules_test.placement_classification_exact

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_classification_exact"

test_denies_a_capitalised_sensitive_value if {
	some violation in testing.denials(rule, testing.pod({"vgate.io/data-classification": "Sensitive"}, testing.compliant_spec))
	contains(violation, `label vgate.io/data-classification="Sensitive" is not "sensitive"`)
}

test_denies_a_near_miss_egress_value_in_a_job_task if {
	some violation in testing.denials(rule, testing.job({"vgate.io/egress": " DENY"}, [testing.compliant_spec]))
	contains(violation, `Job task[0] t0: label vgate.io/egress=" DENY" is not "deny"`)
}

test_allows_exact_and_unrelated_values if {
	count(testing.denials(rule, testing.pod(testing.sensitive, testing.compliant_spec))) == 0
	count(testing.denials(rule, testing.pod({"vgate.io/data-classification": "public"}, testing.compliant_spec))) == 0
}

test_judges_creates_only if {
	count(testing.denials(rule, testing.as_update(testing.pod({"vgate.io/data-classification": "Sensitive"}, {})))) == 0
}
