package vgate.lib.workload_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.lib.workload

# metav1.LabelSelector semantics, as Kubernetes (and vgate's mutation) match them.
test_label_selectors_match_as_kubernetes_does if {
	labels := {"team": "a", "tier": "gpu"}
	every case in [
		[{}, true],
		[{"matchLabels": {"team": "a"}}, true],
		[{"matchLabels": {"team": "b"}}, false],
		[{"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}, true],
		[{"matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]}, false],
		[{"matchExpressions": [{"key": "absent", "operator": "In", "values": ["a"]}]}, false],
		[{"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]}, true],
		[{"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, false],
		[{"matchExpressions": [{"key": "absent", "operator": "NotIn", "values": ["a"]}]}, true],
		[{"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, true],
		[{"matchExpressions": [{"key": "absent", "operator": "Exists"}]}, false],
		[{"matchExpressions": [{"key": "absent", "operator": "DoesNotExist"}]}, true],
		[{"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, false],
		[{"matchLabels": {"team": "a"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["cpu"]}]}, false],
	] {
		matched(case[0], labels) == case[1]
	}
}

matched(selector, labels) if workload.label_selector_matches(selector, labels)

matched(selector, labels) := false if not workload.label_selector_matches(selector, labels)

in_namespace(namespace, annotations) := json.patch(testing.pod({}, {}), [
	{"op": "replace", "path": "/request/namespace", "value": namespace},
	{"op": "add", "path": "/request/object/metadata/annotations", "value": annotations},
])

# A namespace annotated for Volcano (in the cluster state: data.inventory) wins over the config.
test_the_namespaces_annotation_wins_over_the_config if {
	inventory := {"cluster": {"v1": {"Namespace": {"ml-training": {"metadata": {
		"name": "ml-training",
		"annotations": {"scheduling.volcano.sh/queue-name": "batch"},
	}}}}}}
	workload.queue == "batch" with input as in_namespace("ml-training", {}) with data.vgate.config as testing.config
		with data.inventory as inventory
	workload.queue == "other" with input as in_namespace("ml-training", {"scheduling.volcano.sh/queue-name": "other"})
		with data.vgate.config as testing.config with data.inventory as inventory
	workload.queue == "default" with input as in_namespace("web", {}) with data.vgate.config as testing.config
		with data.inventory as inventory
}

# The queue rules judge by: the named one, else the config's; vgate's own annotations never count.
test_the_queue_is_the_named_one_else_the_configs if {
	every case in [
		["ml-training", {"scheduling.volcano.sh/queue-name": "default"}, "training"],
		["ml-training", {"scheduling.volcano.sh/queue-name": ""}, "training"],
		["ml-training", {"scheduling.volcano.sh/queue-name": "default", "vgate.io/injected": "none"}, "training"],
		["ml-training", {}, "training"],
		["ml-training", {"scheduling.volcano.sh/queue-name": "other"}, "other"],
		["web", {}, "default"],
		["web", {"scheduling.volcano.sh/queue-name": "default"}, "default"],
	] {
		workload.queue == case[2] with input as in_namespace(case[0], case[1]) with data.vgate.config as testing.config
	}
}
