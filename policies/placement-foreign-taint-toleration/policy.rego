# METADATA
# title: No tolerating another tenant's dedicated nodes
# description: |
#   Nodes dedicated to a tenant carry the taint <tenancy.dedicatedTaintKey>=<tenant>. A workload
#   may tolerate that taint only for its own namespace's tenant; tolerating it for another
#   tenant, for any value (operator Exists), or every taint at once (no key) lands it on
#   hardware it does not own.
# custom:
#   severity: high
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Tolerate <dedicatedTaintKey>=<your tenant> with operator Equal, or drop the toleration.
package vgate.rules.placement_foreign_taint_toleration

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.first_for_namespace
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.toleration_judged_specs

taint_key := data.vgate.config.tenancy.dedicatedTaintKey

tenant := first_for_namespace(data.vgate.config.tenancy.namespaceTenants, input.request.namespace).tenant

tenant := "" if not first_for_namespace(data.vgate.config.tenancy.namespaceTenants, input.request.namespace)

crosses_tenants(toleration) if {
	object.get(toleration, "key", "") == ""
	toleration.operator == "Exists"
}

crosses_tenants(toleration) if {
	toleration.key == taint_key
	toleration.operator == "Exists"
}

crosses_tenants(toleration) if {
	toleration.key == taint_key
	object.get(toleration, "operator", "Equal") == "Equal"
	object.get(toleration, "value", "") != tenant
}

deny contains msg if {
	some judged in toleration_judged_specs
	some toleration in object.get(judged.spec, "tolerations", [])
	crosses_tenants(toleration)
	msg := sprintf(
		concat(" ", [
			"%s: %s tolerates %v, which admits it to nodes dedicated to other",
			"tenants (namespace %q belongs to tenant %q): tolerate only %s=%s",
		]),
		[obj.kind, judged.where, toleration, input.request.namespace, tenant, taint_key, tenant],
	)
}
