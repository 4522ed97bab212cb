# METADATA
# title: GPUs only from the namespace's security domain
# description: |
#   A pod asking for an accelerator (gpu.resources) must pin node pools (gpu.nodePoolLabel, by
#   nodeSelector or a required node affinity) that all belong to its namespace's security
#   domain: GPU memory and MIG slices are shared by the pods of a node pool, so a pod must not
#   land on a pool of another domain.
# custom:
#   severity: critical
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: "Add nodeSelector {\"<nodePoolLabel>\": \"<a pool of your domain>\"}."
package vgate.rules.placement_gpu_security_domain

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.first_for_namespace
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.required_node_terms

import data.vgate.lib.quantity.value as value_of

gpu := data.vgate.config.gpu

domain := first_for_namespace(gpu.namespaceDomains, input.request.namespace).domain

domain_pools := sort([pool | some pool, pool_domain in gpu.nodePools; pool_domain == domain])

# The judged pod specs (by where) with a container that asks for accelerators: once per evaluation.
accelerated contains judged.where if {
	some judged in judged_containers
	some kind in ["requests", "limits"]
	some resource in gpu.resources

	# Any amount but zero counts, so an amount that is no quantity fails closed (not undefined).
	amount := judged.container.resources[kind][resource]
	not _zero(amount)
}

# Through a helper: OPA evaluates value_of(amount) before a `not`, so `not value_of(amount) == 0`
# would be undefined, not true, for an amount that is no quantity (regorus: true).
_zero(amount) if value_of(amount) == 0

# The pools the pod may land in, if its spec limits them at all.
pinned_pools(spec) := {spec.nodeSelector[gpu.nodePoolLabel]}

pinned_pools(spec) := pools if {
	not spec.nodeSelector[gpu.nodePoolLabel]
	terms := required_node_terms(spec)
	count(terms) > 0
	every term in terms {
		some expression in term.matchExpressions
		expression.key == gpu.nodePoolLabel
		expression.operator == "In"
	}
	pools := {value |
		some term in terms
		some expression in term.matchExpressions
		expression.key == gpu.nodePoolLabel
		some value in expression.values
	}
}

deny contains msg if {
	some judged in judged_specs
	judged.where in accelerated
	not pinned_pools(judged.spec)
	msg := sprintf(
		concat(" ", [
			"%s: %s requests accelerators %v but may land on a GPU pool",
			"of any security domain: pin one of %v with nodeSelector %s",
		]),
		[obj.kind, judged.where, gpu.resources, domain_pools, gpu.nodePoolLabel],
	)
}

deny contains msg if {
	some judged in judged_specs
	judged.where in accelerated
	foreign := {pool | some pool in pinned_pools(judged.spec); object.get(gpu.nodePools, pool, "") != domain}
	count(foreign) > 0
	msg := sprintf(
		"%s: %s requests accelerators on node pools %v outside security domain %q of namespace %q: use one of %v",
		[obj.kind, judged.where, sort(foreign), domain, input.request.namespace, domain_pools],
	)
}
