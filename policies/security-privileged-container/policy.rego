# METADATA
# title: No privileged containers
# description: |
#   A privileged container has every capability and every device of the node: it can read other
#   tenants' memory and disks. No workload scheduled through vgate may run one.
# custom:
#   id: security-privileged-container
#   severity: critical
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove securityContext.privileged, or set it to false.
package vgate.rules.security_privileged_container

import rego.v1

import data.vgate.lib.workload.containers
import data.vgate.lib.workload.judges_new_pods
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.templates

deny contains {"rule": "security-privileged-container", "msg": msg} if {
	judges_new_pods
	some name, template in templates
	some container in containers(template.spec)
	container.securityContext.privileged == true
	msg := sprintf(
		"%s: container %s of %s is privileged, which gives it the whole node: remove securityContext.privileged",
		[obj.kind, container.name, name],
	)
}
