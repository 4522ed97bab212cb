package vgate.rules_test.security_volume_types

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_volume_types"

with_volume(volume) := testing.restricted([{"op": "add", "path": "/volumes", "value": [volume]}])

test_allows_the_core_types if {
	every type in [
		"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
		"projected", "secret",
	] {
		count(testing.denials(rule, with_volume({"name": "v", type: {}}))) == 0
	}
}

test_denies_the_others if {
	every type in [
		"nfs", "iscsi", "rbd", "gitRepo", "cephfs", "glusterfs", "awsElasticBlockStore", "gcePersistentDisk",
		"azureFile", "flexVolume", "cinder", "fc", "flocker", "vsphereVolume", "quobyte", "azureDisk", "portworxVolume",
		"scaleIO", "storageos", "photonPersistentDisk",
	] {
		testing.levels(rule, with_volume({"name": "v", type: {}})) == {
			sprintf(`Pod: restricted volume types (volume "v" uses restricted volume type %q)`, [type]): "restricted",
		}
	}
}

test_leaves_host_path_to_the_baseline_rule if {
	count(testing.denials(rule, with_volume({"name": "v", "hostPath": {"path": "/var/log"}}))) == 0
}
