# METADATA
# title: Sensitive workloads stay in one zone
# description: |
#   A workload labelled sensitive must be pinned to exactly one zone, by nodeSelector or by a
#   required node affinity every term of which names the same single zone; all tasks of a
#   Volcano Job must share that zone, so its data never crosses a zone boundary.
# custom:
#   severity: high
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: "Add nodeSelector {\"<zoneLabel>\": \"<zone>\"} to every pod template."
package vgate.rules.placement_single_zone

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.is_sensitive
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.pinned_zones
import data.vgate.lib.workload.sensitive_label
import data.vgate.lib.workload.zone_label

# The zones each pod template may land in, computed once per evaluation.
template_zones[judged.where] := pinned_zones(judged.spec) if {
	some judged in judged_specs
}

deny contains msg if {
	is_sensitive
	some name, found in template_zones
	count(found) != 1
	msg := sprintf(
		concat(" ", [
			"%s is labelled %s but %s is pinned to %d zones %v: pin it to exactly one",
			"with nodeSelector %s or a required node affinity (operator In, one value)",
		]),
		[obj.kind, sensitive_label, name, count(found), sort(found), zone_label],
	)
}

deny contains msg if {
	is_sensitive
	count(template_zones) > 1 # one template's single zone cannot differ from itself
	every found in template_zones {
		count(found) == 1
	}
	all_zones := {zone | some found in template_zones; some zone in found}
	count(all_zones) > 1
	msg := sprintf(
		"%s is labelled %s but its tasks are pinned to different zones %v: pin every task to the same %s",
		[obj.kind, sensitive_label, sort(all_zones), zone_label],
	)
}
