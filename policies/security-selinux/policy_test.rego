package vgate.rules_test.security_selinux

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_selinux"

with_options(path, options) := testing.restricted([{"op": "add", "path": path, "value": options}])

test_allows_the_container_types_and_any_level if {
	every type in ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"] {
		count(testing.denials(rule, with_options("/securityContext/seLinuxOptions", {"type": type, "level": "s0:c123,c456"}))) == 0
	}
}

test_denies_other_types_users_and_roles if {
	testing.levels(rule, with_options("/securityContext/seLinuxOptions", {"type": "spc_t", "user": "root"})) == {
		`Pod: seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t"; user "root")`: "baseline",
	}
	testing.denials(rule, with_options("/containers/0/securityContext/seLinuxOptions", {"role": "sysadm_r"})) == {
		`Pod: seLinuxOptions (container "main" set forbidden securityContext.seLinuxOptions: role "sysadm_r")`,
	}
}

test_container_engine_t_is_allowed_from_v1_31 if {
	engine := with_options("/securityContext/seLinuxOptions", {"type": "container_engine_t"})
	count(testing.denials_under(rule, engine, testing.at_version("v1.30"))) == 1
	count(testing.denials_under(rule, engine, testing.at_version("v1.31"))) == 0
}
