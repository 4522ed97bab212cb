# METADATA
# title: test fixtures
# description: |
#   AdmissionReviews and a config for the rules' unit tests. A *_test.rego file: loaded by
#   `vgate test`, never by the webhook.
package vgate.lib.testing

import rego.v1

# The example config's sections the rules read, with what these tests pin differently
# (REGO_TEST_CHANGES in webhook/files/example_config.py). Do not edit between the markers.
# BEGIN config generated from webhook/files/defaults/vgate.yaml by `python deploy/render.py`
config := {
	"gpu": {
		"namespaceDomains": [
			{
				"domain": "confidential",
				"namespaces": [
					"ml-inference",
				],
			},
			{
				"domain": "general",
				"namespaces": [
					"*",
				],
			},
		],
		"nodePoolLabel": "vgate.io/node-pool",
		"nodePools": {
			"gpu-secure": "confidential",
			"gpu-shared": "general",
		},
		"resources": [
			"nvidia.com/gpu",
		],
	},
	"images": {
		"allowedRegistries": [
			"registry.example.com/",
		],
	},
	"placement": {
		"confidentialRuntimeClasses": [
			"kata-qemu-snp",
			"kata-qemu-tdx",
		],
		"egress": {
			"allowedPeers": [
				{
					"namespace": "kube-system",
					"podSelector": {
						"matchLabels": {
							"k8s-app": "kube-dns",
						},
					},
				},
			],
			"internalCIDRs": [],
			"podCIDRs": [],
		},
		"egressDenyLabel": {
			"key": "vgate.io/egress",
			"value": "deny",
		},
		"encryptedNodeLabels": [
			"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled",
			"node-restriction.kubernetes.io/cpu-security.tdx.enabled",
		],
		"sensitiveLabel": {
			"key": "vgate.io/data-classification",
			"value": "sensitive",
		},
		"zoneLabel": "topology.kubernetes.io/zone",
	},
	"queues": {
		"byNamespace": {
			"ml-training": "training",
		},
		"bySelector": [
			{
				"queue": "training",
				"selector": {
					"matchLabels": {
						"vgate.io/workload": "training",
					},
				},
			},
		],
		"default": "default",
		"definitions": {
			"default": {
				"namespaces": [
					"*",
				],
				"priorityClass": "vgate-normal",
			},
			"training": {
				"allowedPriorityClasses": [
					"vgate-high",
					"vgate-normal",
				],
				"maxMemoryLimit": "64Gi",
				"namespaces": [
					"ml-training",
					"research-*",
				],
				"priorityClass": "vgate-high",
				"qosClass": "Guaranteed",
			},
		},
	},
	"security": {
		"allowedCapabilities": [
			"NET_BIND_SERVICE",
		],
	},
	"tenancy": {
		"dedicatedTaintKey": "dedicated",
		"namespaceTenants": [
			{
				"namespaces": [
					"ml-training",
				],
				"tenant": "research",
			},
		],
	},
	"volcano": {
		"allowedSchedulers": [],
		"namespaces": [
			"ml-*",
		],
		"schedulerName": "volcano",
	},
}

# END config

# A pod spec with one container, changed by a JSON Patch relative to the container.
container_spec(patch) := {"containers": [json.patch({"name": "main", "image": "registry.example.com/app:1"}, patch)]}

pod_in(namespace, labels, spec) := json.patch(pod(labels, spec), [
	{"op": "replace", "path": "/request/namespace", "value": namespace},
	{"op": "replace", "path": "/request/object/metadata/namespace", "value": namespace},
])

sensitive := {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}

# A pod spec that satisfies every placement rule and the restricted Pod Security Standard.
compliant_spec := {
	"nodeSelector": {
		"topology.kubernetes.io/zone": "zone-a",
		"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true",
	},
	"securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
	"containers": [{
		"name": "main",
		"image": "registry.example.com/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"securityContext": restricted_container_context,
		# ml-training's queue (training) runs Guaranteed: memory limits are required there.
		"resources": {"limits": {"memory": "4Gi", "cpu": "1"}, "requests": {"memory": "4Gi", "cpu": "1"}},
	}],
}

restricted_container_context := {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}

# A pod that passes the restricted standard, changed by a JSON Patch relative to the pod spec.
restricted(patch) := pod({}, json.patch(
	{
		"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
		"containers": [{"name": "main", "image": "registry.example.com/app:1", "securityContext": restricted_container_context}],
	},
	patch,
))

# The test config at another podSecurity version.
at_version(version) := json.patch(config, [{"op": "add", "path": "/podSecurity", "value": {"version": version, "namespaces": []}}])

review(kind, operation, namespace, manifest) := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"request": {
		"uid": "test",
		"kind": kind,
		"operation": operation,
		"namespace": namespace,
		"object": manifest,
	},
}

pod(labels, spec) := review({"group": "", "version": "v1", "kind": "Pod"}, "CREATE", "ml-training", {
	"apiVersion": "v1", "kind": "Pod",
	"metadata": {"name": "p", "namespace": "ml-training", "labels": labels},
	"spec": spec,
})

job(labels, specs) := review(
	{"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"}, "CREATE",
	"ml-training", {
		"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
		"metadata": {"name": "j", "namespace": "ml-training"},
		"spec": {"tasks": [task |
			some i, spec in specs
			task := {"name": sprintf("t%d", [i]), "replicas": 1, "template": {"metadata": {"labels": labels}, "spec": spec}}
		]},
	},
)

as_update(r) := json.patch(r, [{"op": "replace", "path": "/request/operation", "value": "UPDATE"}])

# kubectl debug: an UPDATE of pods/ephemeralcontainers that adds `added` to a running pod (scheduled,
# so spec.nodeName is set) whose ephemeral containers were `before`.
debug(spec, before, added) := json.patch(
	review({"group": "", "version": "v1", "kind": "Pod"}, "UPDATE", "ml-training", running(spec, array.concat(
		before,
		added,
	))),
	[
		{"op": "add", "path": "/request/subResource", "value": "ephemeralcontainers"},
		{"op": "add", "path": "/request/oldObject", "value": running(spec, before)},
	],
)

running(spec, ephemeral) := {
	"apiVersion": "v1", "kind": "Pod",
	"metadata": {"name": "p", "namespace": "ml-training"},
	"spec": object.union(spec, {"nodeName": "node-1", "ephemeralContainers": ephemeral}),
}

# The messages of the deny (or warn) results of the rule package named `rule`
# ("security_privileged_container") for `review`, under the test config or the `settings` given:
# every rule's tests use these. A Pod Security Standards check's {"msg", "level"} counts by its msg.
denials(rule, review) := {message(r) | some r in results} if {
	results := data.vgate.rules[rule].deny with input as review with data.vgate.config as config
}

warnings(rule, review) := result if {
	result := data.vgate.rules[rule].warn with input as review with data.vgate.config as config
}

denials_under(rule, review, settings) := {message(r) | some r in results} if {
	results := data.vgate.rules[rule].deny with input as review with data.vgate.config as settings
}

# A Pod Security Standards check's results as {msg: level}, under the test config or `settings`.
levels(rule, review) := levels_under(rule, review, config)

levels_under(rule, review, settings) := {r.msg: r.level | some r in results} if {
	results := data.vgate.rules[rule].deny with input as review with data.vgate.config as settings
}

message(result) := result if is_string(result)

message(result) := result.msg if is_object(result)

# A Binding of pod `p` (`pod_labels`, `pod_spec`, in PodGroup g) in ml-training to a node with
# `node_labels` and `taints`, the PodGroup's other members already placed as `members`
# ([{"pod", "node", "zone"}]): input.binding as vgate's cluster state gives it.
binding(pod_labels, pod_spec, node_labels, taints, members) := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"request": {
		"uid": "test",
		"kind": {"group": "", "version": "v1", "kind": "Binding"},
		"resource": {"group": "", "version": "v1", "resource": "pods"},
		"subResource": "binding",
		"operation": "CREATE",
		"namespace": "ml-training",
		"name": "p",
		"object": {
			"apiVersion": "v1", "kind": "Binding",
			"metadata": {"name": "p", "namespace": "ml-training"},
			"target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
		},
	},
	"binding": {
		"pod": {
			"apiVersion": "v1", "kind": "Pod",
			"metadata": {
				"name": "p", "namespace": "ml-training", "labels": pod_labels,
				"annotations": {"scheduling.k8s.io/group-name": "g"},
			},
			"spec": pod_spec,
		},
		"node": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": node_labels}, "spec": {"taints": taints}},
		"podGroup": null,
		"members": members,
	},
}

# A node in zone-a with memory encryption (SEV-SNP).
encrypted_node_a := {
	"topology.kubernetes.io/zone": "zone-a",
	"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true",
}
