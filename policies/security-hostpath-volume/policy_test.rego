package vgate.rules_test.security_hostpath_volume

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_hostpath_volume"

test_denies_host_path if {
	spec := {"volumes": [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}]}
	levels := testing.levels(rule, testing.pod({}, spec))
	levels == {`Pod: hostPath volumes (volume "docker": use a PersistentVolumeClaim, emptyDir or CSI volume instead)`: "baseline"}
}

test_allows_other_volumes if {
	spec := {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}, {"name": "tmp", "emptyDir": {}}]}
	count(testing.denials(rule, testing.pod({}, spec))) == 0
}

# One violation per problem, and /dev/mem denied here whatever the memory-mapping rule's action.
test_denies_memory_devices_once_and_by_name if {
	every device in ["/dev/mem", "/dev/kmem", "/dev/port"] {
		spec := {"volumes": [{"name": "mem", "hostPath": {"path": device}}]}
		violations := testing.denials(rule, testing.pod({}, spec))
		count(violations) == 1
		some violation in violations
		contains(violation, sprintf("maps the node's memory device %s: remove it", [device]))
	}
}
