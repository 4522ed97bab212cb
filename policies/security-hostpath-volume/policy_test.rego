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
