package vgate.rules_test.security_hostpath_volume

import rego.v1

import data.vgate.lib.testing

test_denies_host_path if {
	spec := {"volumes": [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}]}
	some violation in testing.denials("security_hostpath_volume", testing.pod({}, spec))
	contains(violation, "volume docker of pod mounts the node's path /var/run/docker.sock")
}

test_allows_other_volumes if {
	spec := {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}, {"name": "tmp", "emptyDir": {}}]}
	count(testing.denials("security_hostpath_volume", testing.pod({}, spec))) == 0
}

# One violation per problem, and /dev/mem denied here whatever the memory-mapping rule's action.
test_denies_memory_devices_once_and_by_name if {
	every device in ["/dev/mem", "/dev/kmem", "/dev/port"] {
		spec := {"volumes": [{"name": "mem", "hostPath": {"path": device}}]}
		violations := testing.denials("security_hostpath_volume", testing.pod({}, spec))
		count(violations) == 1
		some violation in violations
		contains(violation, sprintf("maps the node's memory device %s: remove it", [device]))
	}
}
