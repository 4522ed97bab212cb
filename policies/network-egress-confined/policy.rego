# METADATA
# title: Sensitive pods reach nothing outside, as the cluster's NetworkPolicies actually allow
# description: |
#   A label is not a boundary: NetworkPolicies are additive allow-lists, so one policy allowing
#   0.0.0.0/0, a deleted deny policy or a relay pod a tenant controls opens a way out whatever a
#   pod is labelled. vgate computes each sensitive pod's effective egress from the cluster's
#   NetworkPolicies, Namespaces, Pods and Services (input.egress, webhook/core/egress_judge.py):
#   a sensitive pod is confined when everything it can reach, directly or through the pods it
#   reaches, is inside the configured internal ranges, a confined pod, or an allowed peer (the
#   cluster's DNS). A sensitive pod that is not confined is refused; so is any write (a
#   NetworkPolicy, a Namespace's labels, a pod) that would un-confine one already admitted, and a
#   Service or Ingress that would make one reachable from outside the cluster.
# custom:
#   severity: critical
#   category: network
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.3.1 boundary protection"
#   remediation: Select the pod with a NetworkPolicy reaching only internal ranges, confined pods or DNS.
package vgate.rules.network_egress_confined

import rego.v1

egress := object.get(input, "egress", {})

what := sprintf("%s %s", [input.request.kind.kind, object.get(input.request, "name", "")])

deny contains msg if {
	some pod in object.get(egress, "pods", [])
	pod.confined == false
	msg := sprintf(
		"sensitive pod %s of %s would reach outside the cluster: %s",
		[pod.pod, what, concat("; ", pod.reasons)],
	)
}

deny contains msg if {
	some opened in object.get(egress, "unconfines", [])
	msg := sprintf(
		"%s would open a way outside the cluster for sensitive pods %s: %s",
		[what, concat(", ", opened.pods), opened.reason],
	)
}

deny contains msg if {
	exposed := object.get(egress, "exposes", [])
	count(exposed) > 0
	msg := sprintf(
		"%s would make sensitive pods %s reachable from outside the cluster: select no sensitive pod",
		[what, concat(", ", exposed)],
	)
}
