package vgate.rules_test.placement_unencrypted_memory_mapping

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_unencrypted_memory_mapping"

memory_volume := {"name": "shm", "emptyDir": {"medium": "Memory"}}

test_leaves_memory_devices_to_the_host_path_rule if {
	spec := {"volumes": [{"name": "mem", "hostPath": {"path": "/dev/mem"}}]}
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 0
}

test_denies_memory_volume_of_sensitive_pod_off_encrypted_nodes if {
	spec := {"nodeSelector": {"topology.kubernetes.io/zone": "a"}, "volumes": [memory_volume]}
	some violation in testing.denials(rule, testing.pod(testing.sensitive, spec))
	contains(violation, "emptyDir shm (medium: Memory)")
}

test_denies_hugepages_of_sensitive_pod_off_encrypted_nodes if {
	spec := {"containers": [{"name": "dpdk", "resources": {"limits": {"hugepages-2Mi": "1Gi"}}}]}
	some violation in testing.denials(rule, testing.pod(testing.sensitive, spec))
	contains(violation, "hugepages-2Mi in container dpdk")
}

test_allows_memory_volume_on_encrypted_nodes if {
	spec := object.union(testing.compliant_spec, {"volumes": [memory_volume]})
	count(testing.denials(rule, testing.pod(testing.sensitive, spec))) == 0
}

test_allows_memory_volume_of_ordinary_workloads if {
	count(testing.denials(rule, testing.pod({}, {"volumes": [memory_volume]}))) == 0
}
