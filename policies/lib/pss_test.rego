package vgate.lib.pss_test

import rego.v1

import data.vgate.lib.pss
import data.vgate.lib.testing

settings := json.patch(testing.config, [{"op": "add", "path": "/podSecurity", "value": {
	"version": "v1.30",
	"namespaces": [
		{"namespaces": ["legacy-*"], "version": "v1.22"},
		{"namespaces": ["ml-*"], "enforce": "restricted"},
	],
}}])

test_the_first_matching_namespace_entry_sets_the_version if {
	pss.minor == 22 with input as testing.pod_in("legacy-app", {}, {}) with data.vgate.config as settings
}

test_an_entry_without_a_version_keeps_the_top_level_one if {
	pss.minor == 30 with input as testing.pod_in("ml-training", {}, {}) with data.vgate.config as settings
	pss.minor == 30 with input as testing.pod_in("web", {}, {}) with data.vgate.config as settings
}

test_latest_is_the_newest_version_with_a_change if {
	latest := json.patch(settings, [{"op": "replace", "path": "/podSecurity/version", "value": "latest"}])
	pss.minor == pss.latest_minor with input as testing.pod_in("web", {}, {}) with data.vgate.config as latest
}
