# METADATA
# title: Sensitive workloads stay in one zone
# description: |
#   A workload labelled sensitive must be pinned to exactly one zone, by nodeSelector or by a
#   required node affinity every term of which names the same single zone; all tasks of a
#   Volcano Job must share that zone, so its data never crosses a zone boundary.
# custom:
#   id: placement-single-zone
#   severity: high
#   category: placement
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Add nodeSelector {"<zoneLabel>": "<zone>"} to every pod template.
package vgate.rules.placement_single_zone

import rego.v1

import data.vgate.lib.workload

zone_label := data.vgate.config.placement.zoneLabel

selector_zones(spec) := {zone | zone := object.get(spec, ["nodeSelector", zone_label], null); zone != null}

term_zones(term) := {value |
	some expression in object.get(term, "matchExpressions", [])
	expression.key == zone_label
	expression.operator == "In"
	count(expression.values) == 1
	some value in expression.values
}

term_pins_one_zone(term) if count(term_zones(term)) == 1

# Node selector terms are ORed: the affinity pins a zone only if every term does.
affinity_zones(spec) := {zone | some term in workload.required_node_terms(spec); some zone in term_zones(term)} if {
	terms := workload.required_node_terms(spec)
	count(terms) > 0
	every term in terms {
		term_pins_one_zone(term)
	}
} else := set()

zones(spec) := selector_zones(spec) | affinity_zones(spec)

deny contains {"rule": "placement-single-zone", "msg": msg} if {
	workload.judges_placement
	workload.is_sensitive
	some name, template in workload.templates
	found := zones(template.spec)
	count(found) != 1
	msg := sprintf(
		"%s is labelled %s but %s is pinned to %d zones %v: pin it to exactly one with nodeSelector %s or a required node affinity (operator In, one value)",
		[workload.obj.kind, workload.sensitive_label, name, count(found), sort(found), zone_label],
	)
}

deny contains {"rule": "placement-single-zone", "msg": msg} if {
	workload.judges_placement
	workload.is_sensitive
	every template in workload.templates {
		count(zones(template.spec)) == 1
	}
	all_zones := {zone | some template in workload.templates; some zone in zones(template.spec)}
	count(all_zones) > 1
	msg := sprintf(
		"%s is labelled %s but its tasks are pinned to different zones %v: pin every task to the same %s",
		[workload.obj.kind, workload.sensitive_label, sort(all_zones), zone_label],
	)
}
