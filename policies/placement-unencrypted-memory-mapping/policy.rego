# METADATA
# title: No unencrypted mapping of memory
# description: |
#   A sensitive workload off memory-encrypted nodes must not put data in node memory that
#   outlives or escapes the container: memory-backed emptyDir volumes and hugepages.
# custom:
#   severity: critical
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.8 data confidentiality"
#   remediation: Run sensitive workloads using memory volumes or hugepages on encrypted nodes, or drop those.
package vgate.rules.placement_unencrypted_memory_mapping

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.containers
import data.vgate.lib.workload.is_sensitive
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.runs_on_encrypted_memory
import data.vgate.lib.workload.sensitive_label

memory_uses(spec) := array.concat(
	[sprintf("emptyDir %s (medium: Memory)", [v.name]) |
		some v in object.get(
			spec, "volumes",
			[],
		)
		v.emptyDir.medium == "Memory"
	],
	[sprintf("%s in container %s", [resource, c.name]) |
		some c in containers(spec)
		some resource, _ in object.union(object.get(c, ["resources", "requests"], {}), object.get(
			c, [
				"resources",
				"limits",
			],
			{},
		))
		startswith(resource, "hugepages-")
	],
)

deny contains msg if {
	is_sensitive
	some judged in judged_specs
	not runs_on_encrypted_memory(judged.spec)
	uses := memory_uses(judged.spec)
	count(uses) > 0
	msg := sprintf(
		"%s is labelled %s and %s keeps data in unencrypted node memory (%v): run it on memory-encrypted nodes or drop them",
		[obj.kind, sensitive_label, judged.where, uses],
	)
}
