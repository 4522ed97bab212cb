package vgate.rules_test.scheduling_queue_allowed

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "scheduling_queue_allowed"

pod_in_queue(queue) := json.patch(testing.pod({}, {}), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"scheduling.volcano.sh/queue-name": queue},
}])

test_allows_queue_allowed_for_the_namespace if {
	count(testing.denials(rule, pod_in_queue("training"))) == 0
}

test_allows_queue_open_to_every_namespace if {
	count(testing.denials(rule, pod_in_queue("default"))) == 0
}

test_allows_pod_without_queue if {
	count(testing.denials(rule, testing.pod({}, {}))) == 0
}

test_denies_unknown_queue if {
	some violation in testing.denials(rule, pod_in_queue("gpu-premium"))
	contains(violation, `queue "gpu-premium", which the gateway does not know`)
	contains(violation, "mapped in queues.byNamespace")
}

test_denies_queue_of_another_namespace if {
	review := json.patch(pod_in_queue("training"), [{"op": "replace", "path": "/request/namespace", "value": "web"}])
	some violation in testing.denials(rule, review)
	contains(violation, `namespace "web" names Volcano queue "training"`)
	contains(violation, `["default"]`)
}

test_allows_namespace_matching_a_glob if {
	review := json.patch(pod_in_queue("training"), [{
		"op": "replace", "path": "/request/namespace",
		"value": "research-nlp",
	}])
	count(testing.denials(rule, review)) == 0
}

test_denies_volcano_job_spec_queue if {
	review := json.patch(testing.job({}, [{}]), [{"op": "add", "path": "/request/object/spec/queue", "value": "nope"}])
	count(testing.denials(rule, review)) == 1
}

test_denies_a_pod_group_naming_an_unknown_queue if {
	kind := {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "PodGroup"}
	group := {"kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ml-training"}, "spec": {"queue": "gpu-premium"}}
	some violation in testing.denials(rule, testing.review(kind, "CREATE", "ml-training", group))
	contains(violation, `PodGroup names Volcano queue "gpu-premium"`)
}

# Bypass: CREATE was judged, an UPDATE moving spec.queue (or a pod's queue annotation) was not.
moved(kind, before, after) := json.patch(queued(kind, after), [
	{"op": "replace", "path": "/request/operation", "value": "UPDATE"},
	{"op": "add", "path": "/request/oldObject", "value": queued(kind, before).request.object},
])

test_an_update_moving_to_a_queue_the_namespace_may_not_use_is_denied if {
	every kind in ["PodGroup", "Job", "Pod"] {
		some violation in testing.denials(rule, moved(kind, "default", "training"))
		contains(violation, `names Volcano queue "training", which that namespace may not use`)
	}
}

test_an_update_that_keeps_the_queue_is_not_judged_again if {
	every kind in ["PodGroup", "Job", "Pod"] {
		count(testing.denials(rule, moved(kind, "training", "training"))) == 0
	}
}

# A workload of ``kind`` in namespace "web" (which may use `default` only) naming ``queue``.
queued("Pod", queue) := json.patch(testing.pod_in("web", {}, {}), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {"scheduling.volcano.sh/queue-name": queue},
}])

queued("Job", queue) := testing.review(
	{"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"}, "CREATE",
	"web", {
		"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "web"},
		"spec": {"queue": queue, "tasks": []},
	},
)

queued("PodGroup", queue) := testing.review(
	{"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "PodGroup"},
	"CREATE", "web", {
		"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": {"name": "g", "namespace": "web"}, "spec": {"queue": queue},
	},
)
