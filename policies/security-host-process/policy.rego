# METADATA
# title: No Windows HostProcess containers
# description: |
#   Pod Security Standards, baseline, "HostProcess": a Windows HostProcess container runs
#   directly on the node, as a process of the host, with its network and file system.
# custom:
#   severity: critical
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove securityContext.windowsOptions.hostProcess (pod and containers), or set it to false.
#   pss:
#     check: HostProcess
#     level: baseline
#     fields:
#       - spec.securityContext.windowsOptions.hostProcess
#       - spec.{initContainers,containers,ephemeralContainers}[*].securityContext.windowsOptions.hostProcess
package vgate.rules.security_host_process

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.container_groups
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.setters

deny contains failure(where, "hostProcess", detail, "baseline") if {
	some where, group in container_groups
	pod_set := object.get(group.spec, ["securityContext", "windowsOptions", "hostProcess"], false) == true
	names := [c.name | some c in group.containers; c.securityContext.windowsOptions.hostProcess == true]
	true in [pod_set, count(names) > 0]
	detail := sprintf("%s must not set securityContext.windowsOptions.hostProcess=true", [setters(pod_set, names)])
}
