package vgate.rules.security_hostpath_volume_test

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.security_hostpath_volume as rule

denials(review) := result if {
	result := rule.deny with input as review with data.vgate.config as testing.config
}

test_denies_host_path if {
	spec := {"volumes": [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}]}
	some violation in denials(testing.pod({}, spec))
	contains(violation, "volume docker of pod mounts the node's path /var/run/docker.sock")
}

test_allows_other_volumes if {
	spec := {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}, {"name": "tmp", "emptyDir": {}}]}
	count(denials(testing.pod({}, spec))) == 0
}
