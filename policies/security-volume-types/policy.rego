# METADATA
# title: Only core volume types
# description: |
#   Pod Security Standards, restricted, "Volume Types": only configMap, csi, downwardAPI,
#   emptyDir, ephemeral, image, persistentVolumeClaim, projected and secret volumes; anything
#   else (nfs, iscsi, rbd, gitRepo, cephfs, ...) reaches storage around PersistentVolumes and their
#   access control. hostPath is security-hostpath-volume's (baseline), not said twice.
# custom:
#   severity: medium
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Use a PersistentVolumeClaim (or CSI, ephemeral) for the storage instead of the inline volume source.
#   pss: {check: Volume Types, level: restricted, fields: ["spec.volumes[*]"]}
package vgate.rules.security_volume_types

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.plural
import data.vgate.lib.pss.quoted
import data.vgate.lib.pss.uses
import data.vgate.lib.workload.judged_specs

allowed_types := {
	"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected",
	"secret",
}

# A volume's source fields: every key but its name (a volume the API server sent with no source
# was defaulted to emptyDir before any webhook).
restricted_types(volume) := {key | some key, _ in volume; not key in allowed_types; not key in {"name", "hostPath"}}

deny contains failure(judged.where, "restricted volume types", detail, "restricted") if {
	some judged in judged_specs
	bad := [v | some v in object.get(judged.spec, "volumes", []); count(restricted_types(v)) > 0]
	count(bad) > 0
	types := sort({t | some v in bad; some t in restricted_types(v)})
	detail := sprintf("%s %s %s %s %s", [
		plural("volume", bad), quoted([v.name | some v in bad]), uses(bad), plural("restricted volume type", types),
		quoted(types),
	])
}
