# METADATA
# title: No hostPath volumes
# description: |
#   Pod Security Standards, baseline, "HostPath Volumes": a hostPath volume mounts the node's file
#   system into the pod: credentials of other tenants, the container runtime socket, the node's
#   memory (/dev/mem, /dev/kmem, /dev/port, named as such, denied here whatever the action of
#   placement-unencrypted-memory-mapping). Use a PersistentVolumeClaim or an emptyDir.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Replace the hostPath volume by a PersistentVolumeClaim, emptyDir or CSI volume.
#   pss: {check: HostPath Volumes, level: baseline, fields: ["spec.volumes[*].hostPath"]}
package vgate.rules.security_hostpath_volume

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.plural
import data.vgate.lib.pss.quoted
import data.vgate.lib.workload.judged_specs
import data.vgate.lib.workload.memory_devices

deny contains failure(judged.where, "hostPath volumes", detail, "baseline") if {
	some judged in judged_specs
	names := [v.name | some v in object.get(judged.spec, "volumes", []); v.hostPath; not v.hostPath.path in memory_devices]
	count(names) > 0
	detail := sprintf("%s %s: use a PersistentVolumeClaim, emptyDir or CSI volume instead", [
		plural("volume", names), quoted(names),
	])
}

deny contains failure(judged.where, "hostPath volumes", detail, "baseline") if {
	some judged in judged_specs
	some volume in object.get(judged.spec, "volumes", [])
	volume.hostPath.path in memory_devices
	detail := sprintf("volume %q maps the node's memory device %s: remove it", [volume.name, volume.hostPath.path])
}
