package vgate.rules_test.security_privileged_container

import rego.v1

import data.vgate.lib.testing

test_denies_privileged_container if {
	spec := testing.container_spec([{"op": "add", "path": "/securityContext", "value": {"privileged": true}}])
	some violation in testing.denials("security_privileged_container", testing.pod({}, spec))
	contains(violation, "container main of pod is privileged")
}

test_denies_privileged_init_container_in_a_job_task if {
	spec := {"initContainers": [{"name": "setup", "securityContext": {"privileged": true}}], "containers": []}
	count(testing.denials("security_privileged_container", testing.job({}, [spec]))) == 1
}

test_allows_unprivileged_container if {
	spec := testing.container_spec([{"op": "add", "path": "/securityContext", "value": {"privileged": false}}])
	count(testing.denials("security_privileged_container", testing.pod({}, spec))) == 0
}

test_denies_a_privileged_ephemeral_container_kubectl_debug_adds if {
	added := [{"name": "debugger", "image": "registry.example.com/busybox:1", "securityContext": {"privileged": true}}]
	some violation in testing.denials("security_privileged_container", testing.debug(testing.container_spec([]), [],
		added))
	contains(violation, "container debugger of pod (ephemeral) is privileged")
}

test_judges_only_the_ephemeral_containers_a_debug_request_adds if {
	before := [{"name": "old", "image": "registry.example.com/busybox:1", "securityContext": {"privileged": true}}]
	added := [{"name": "new", "image": "registry.example.com/busybox:1"}]
	count(testing.denials("security_privileged_container", testing.debug(testing.container_spec([]), before, added))) == 0
}
