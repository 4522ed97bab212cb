# METADATA
# title: vgate decision
# description: |
#   The one rule the webhook evaluates. Every package vgate.rules.<name> yields deny and warn sets
#   of messages; this gathers them as {"rule": id, "msg": text}, the rule id being the package name
#   with dashes (the rule's folder), so a rule never writes its own id. A rule may also yield
#   objects: {"msg": text, "level": "baseline"} from a Pod Security Standards check gets the id
#   too; an object's own "rule" is kept. Input is the AdmissionReview, the
#   gateway config is data.vgate.config.
package vgate.main

import rego.v1

deny contains decision(name, found) if {
	some name, rule in data.vgate.rules
	some found in rule.deny
}

warn contains decision(name, found) if {
	some name, rule in data.vgate.rules
	some found in rule.warn
}

# METADATA
# description: What the webhook (and an OPA serving these files) evaluates.
# entrypoint: true
result := {"deny": deny, "warn": warn}

decision(name, found) := {"rule": replace(name, "_", "-"), "msg": found} if is_string(found)

decision(name, found) := object.union({"rule": replace(name, "_", "-")}, found) if is_object(found)

# Anything else reaches the contract check as it is, and fails it there.
decision(_, found) := found if {
	not is_string(found)
	not is_object(found)
}
