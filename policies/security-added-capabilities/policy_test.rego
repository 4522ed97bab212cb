package vgate.rules.security_added_capabilities_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.security_added_capabilities as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

adding(capabilities) := testing.container_spec([{"op": "add", "path": "/securityContext", "value": {"capabilities": {"add": capabilities}}}])

test_denies_sys_admin_with_or_without_cap_prefix if {
	some violation in denials(testing.pod({}, adding(["CAP_SYS_ADMIN", "NET_BIND_SERVICE"])))
	contains(violation, `adds capabilities ["SYS_ADMIN"]`)
}

test_allows_allowed_capability_in_any_case if {
	count(denials(testing.pod({}, adding(["net_bind_service"])))) == 0
}

test_allows_dropping_capabilities if {
	spec := testing.container_spec([{"op": "add", "path": "/securityContext", "value": {"capabilities": {"drop": ["ALL"]}}}])
	count(denials(testing.pod({}, spec))) == 0
}
