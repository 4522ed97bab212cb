# METADATA
# title: test fixtures
# description: |
#   AdmissionReviews and a config for the rules' unit tests. A *_test.rego file: loaded by
#   `vgate test`, never by the webhook.
package vgate.lib.testing

import rego.v1

config := {
	"placement": {
		"sensitiveLabel": {"key": "vgate.io/data-classification", "value": "sensitive"},
		"zoneLabel": "topology.kubernetes.io/zone",
		"encryptedNodeLabels": ["node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"],
		"confidentialRuntimeClasses": ["kata-qemu-snp"],
		"egressDenyLabel": {"key": "vgate.io/egress", "value": "deny"},
	},
	"queues": {"definitions": {
		"default": {"namespaces": ["*"]},
		"training": {"namespaces": ["ml-training", "research-*"]},
	}},
}

sensitive := {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}

# A pod spec that satisfies every placement rule.
compliant_spec := {
	"nodeSelector": {
		"topology.kubernetes.io/zone": "zone-a",
		"node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true",
	},
	"containers": [{"name": "main", "image": "registry.example/app@sha256:0"}],
}

review(kind, operation, namespace, object) := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"request": {
		"uid": "test",
		"kind": kind,
		"operation": operation,
		"namespace": namespace,
		"object": object,
	},
}

pod(labels, spec) := review({"group": "", "version": "v1", "kind": "Pod"}, "CREATE", "ml-training", {
	"apiVersion": "v1", "kind": "Pod",
	"metadata": {"name": "p", "namespace": "ml-training", "labels": labels},
	"spec": spec,
})

job(labels, specs) := review({"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"}, "CREATE", "ml-training", {
	"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
	"metadata": {"name": "j", "namespace": "ml-training"},
	"spec": {"tasks": [task |
		some i, spec in specs
		task := {"name": sprintf("t%d", [i]), "replicas": 1, "template": {"metadata": {"labels": labels}, "spec": spec}}
	]},
})

as_update(r) := json.patch(r, [{"op": "replace", "path": "/request/operation", "value": "UPDATE"}])
