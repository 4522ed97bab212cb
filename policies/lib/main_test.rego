package vgate.main_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.main

test_result_gathers_denials_of_every_rule if {
	result := main.result with input as testing.pod(
		{"vgate.io/data-classification": "sensitive"},
		{},
	)
		with data.vgate.config as testing.config
	rules := {violation.rule | some violation in result.deny}
	rules == {"placement-single-zone", "placement-encrypted-memory", "network-no-external"}
	result.warn == set()
}

test_result_is_empty_for_a_compliant_workload if {
	result := main.result with input as testing.pod(
		testing.sensitive,
		testing.compliant_spec,
	)
		with data.vgate.config as testing.config
	result == {"deny": set(), "warn": set()}
}

test_a_rule_that_yields_its_own_objects_keeps_them if {
	legacy := {"legacy_rule": {"deny": {{"rule": "legacy-id", "msg": "found"}, "plain message"}, "warn": {"careful"}}}
	result := main.result with data.vgate.rules as legacy with data.vgate.config as testing.config
	result.deny == {{"rule": "legacy-id", "msg": "found"}, {"rule": "legacy-rule", "msg": "plain message"}}
	result.warn == {{"rule": "legacy-rule", "msg": "careful"}}
}

test_a_check_that_yields_its_level_gets_its_rule_id if {
	checks := {"security_seccomp": {"deny": {{"msg": "unconfined", "level": "baseline"}}}}
	result := main.result with data.vgate.rules as checks with data.vgate.config as testing.config
	result.deny == {{"rule": "security-seccomp", "msg": "unconfined", "level": "baseline"}}
}

test_anything_else_reaches_the_contract_check_as_it_is if {
	broken := {"broken": {"deny": {42}}}
	result := main.result with data.vgate.rules as broken with data.vgate.config as testing.config
	result.deny == {42}
}
