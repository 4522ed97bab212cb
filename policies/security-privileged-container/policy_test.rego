package vgate.rules_test.security_privileged_container

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_privileged_container"

test_denies_privileged_container if {
	spec := testing.container_spec([{"op": "add", "path": "/securityContext", "value": {"privileged": true}}])
	levels := testing.levels(rule, testing.pod({}, spec))
	levels == {`Pod: privileged (container "main" must not set securityContext.privileged=true)`: "baseline"}
}

test_denies_privileged_init_container_in_a_job_task if {
	spec := {"initContainers": [{"name": "setup", "securityContext": {"privileged": true}}], "containers": []}
	count(testing.denials(rule, testing.job({}, [spec]))) == 1
}

test_allows_unprivileged_container if {
	spec := testing.container_spec([{"op": "add", "path": "/securityContext", "value": {"privileged": false}}])
	count(testing.denials(rule, testing.pod({}, spec))) == 0
}

test_denies_a_privileged_ephemeral_container_kubectl_debug_adds if {
	added := [{"name": "debugger", "image": "registry.example.com/busybox:1", "securityContext": {"privileged": true}}]
	some violation in testing.denials(rule, testing.debug(testing.container_spec([]), [], added))
	contains(violation, `Pod pod (ephemeral): privileged (container "debugger" must not set`)
}

test_judges_only_the_ephemeral_containers_a_debug_request_adds if {
	before := [{"name": "old", "image": "registry.example.com/busybox:1", "securityContext": {"privileged": true}}]
	added := [{"name": "new", "image": "registry.example.com/busybox:1"}]
	count(testing.denials(rule, testing.debug(testing.container_spec([]), before, added))) == 0
}
