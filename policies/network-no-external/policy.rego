# METADATA
# title: Sensitive workloads have no external network path
# description: |
#   A workload labelled sensitive must not use the node's network (hostNetwork, hostPort) and
#   must carry the label the cluster's deny-egress NetworkPolicy selects, so it cannot reach or
#   be reached from outside the cluster.
# custom:
#   severity: high
#   category: network
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.3.1 boundary protection"
#   remediation: Remove hostNetwork and hostPort; add the deny-egress label to the pod template.
package vgate.rules.network_no_external

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.is_sensitive
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.labels_of
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.sensitive_label

egress := data.vgate.config.placement.egressDenyLabel

deny contains msg if {
	is_sensitive
	some judged in judged_specs
	judged.spec.hostNetwork == true
	msg := sprintf(
		"%s is labelled %s but %s sets hostNetwork: true, which bypasses NetworkPolicy: remove hostNetwork",
		[obj.kind, sensitive_label, judged.where],
	)
}

deny contains msg if {
	is_sensitive
	some judged in judged_containers
	some port in object.get(judged.container, "ports", [])
	object.get(port, "hostPort", 0) > 0
	msg := sprintf(
		"%s is labelled %s but container %s of %s opens hostPort %v on the node: remove hostPort",
		[obj.kind, sensitive_label, judged.container.name, judged.where, port.hostPort],
	)
}

deny contains msg if {
	is_sensitive
	some judged in judged_specs
	object.get(labels_of(judged.metadata), egress.key, null) != egress.value
	msg := sprintf(
		"%s is labelled %s but %s lacks the label %s=%s that the deny-egress NetworkPolicy selects: add it to the pod labels",
		[obj.kind, sensitive_label, judged.where, egress.key, egress.value],
	)
}
