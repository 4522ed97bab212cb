package vgate.rules_test.security_added_capabilities

import rego.v1

import data.vgate.lib.testing

adding(capabilities) := testing.container_spec([{"op": "add", "path": "/securityContext",
	"value": {"capabilities": {"add": capabilities}}}])

test_denies_sys_admin_with_or_without_cap_prefix if {
	some violation in testing.denials("security_added_capabilities", testing.pod({}, adding(["CAP_SYS_ADMIN",
		"NET_BIND_SERVICE"])))
	contains(violation, `adds capabilities ["SYS_ADMIN"]`)
}

test_allows_allowed_capability_in_any_case if {
	count(testing.denials("security_added_capabilities", testing.pod({}, adding(["net_bind_service"])))) == 0
}

test_allows_dropping_capabilities if {
	spec := testing.container_spec([{"op": "add", "path": "/securityContext",
		"value": {"capabilities": {"drop": ["ALL"]}}}])
	count(testing.denials("security_added_capabilities", testing.pod({}, spec))) == 0
}
