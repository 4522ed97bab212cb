# METADATA
# title: vgate decision
# description: |
#   The one rule the webhook evaluates. Every package under vgate.rules yields deny and warn
#   sets of {"rule": id, "msg": text}; this gathers them. Input is the AdmissionReview, the
#   gateway config is data.vgate.config.
package vgate.main

import rego.v1

deny contains violation if some violation in data.vgate.rules[_].deny

warn contains violation if some violation in data.vgate.rules[_].warn

result := {"deny": deny, "warn": warn}
