package vgate.main_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.main

test_result_gathers_denials_of_every_rule if {
	result := main.result with input as testing.pod({"vgate.io/data-classification": "sensitive"}, {}) with data.vgate.config as testing.config
	rules := {violation.rule | some violation in result.deny}
	rules == {"placement-single-zone", "placement-encrypted-memory", "network-no-external"}
	result.warn == set()
}

test_result_is_empty_for_a_compliant_workload if {
	result := main.result with input as testing.pod(testing.sensitive, testing.compliant_spec) with data.vgate.config as testing.config
	result == {"deny": set(), "warn": set()}
}
