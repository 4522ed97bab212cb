package vgate.rules_test.placement_classification_unit

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_classification_unit"

labelled_job(job_labels, task_labels) := json.patch(testing.job(task_labels, [testing.compliant_spec]), [
	{"op": "add", "path": "/request/object/metadata/labels", "value": job_labels},
])

test_denies_a_task_contrary_to_its_sensitive_job if {
	job := labelled_job(testing.sensitive, {"vgate.io/data-classification": "public", "vgate.io/egress": "deny"})
	some violation in testing.denials(rule, job)
	contains(violation, `task[0] t0: its pods would carry vgate.io/data-classification="public"`)
}

test_denies_a_task_lacking_the_jobs_label if {
	some violation in testing.denials(rule, labelled_job({"vgate.io/egress": "deny"}, {}))
	contains(violation, `vgate.io/egress=null where the Job is labelled vgate.io/egress=deny`)
}

test_allows_tasks_labelled_as_the_job_and_ordinary_jobs if {
	count(testing.denials(rule, labelled_job(testing.sensitive, testing.sensitive))) == 0
	count(testing.denials(rule, labelled_job({}, {"vgate.io/data-classification": "public"}))) == 0
}
