# METADATA
# title: No hostPath volumes
# description: |
#   A hostPath volume mounts the node's file system into the pod: credentials of other tenants,
#   the container runtime socket, the node's memory (/dev/mem, /dev/kmem, /dev/port). Use a
#   PersistentVolumeClaim or an emptyDir.
# custom:
#   id: security-hostpath-volume
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Replace the hostPath volume by a PersistentVolumeClaim, emptyDir or CSI volume.
package vgate.rules.security_hostpath_volume

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.memory_devices
import data.vgate.lib.workload.obj

deny contains msg if {
	some judged in judged_specs
	some volume in object.get(judged.spec, "volumes", [])
	volume.hostPath
	not volume.hostPath.path in memory_devices
	msg := sprintf(
		"%s: volume %s of %s mounts the node's path %s: use a PersistentVolumeClaim, emptyDir or CSI volume instead",
		[obj.kind, volume.name, judged.where, volume.hostPath.path],
	)
}

# The node's physical memory, named as such. Denied here, whatever the action of
# placement-unencrypted-memory-mapping (which judges memory a sensitive workload keeps data in).
deny contains msg if {
	some judged in judged_specs
	some volume in object.get(judged.spec, "volumes", [])
	volume.hostPath.path in memory_devices
	msg := sprintf(
		"%s: volume %s of %s maps the node's memory device %s: remove it",
		[obj.kind, volume.name, judged.where, volume.hostPath.path],
	)
}
