# METADATA
# title: Only safe sysctls
# description: |
#   Pod Security Standards, baseline, "Sysctls": a pod may set only the sysctls the kubelet
#   namespaces per pod and isolates from the node; the safe list grew at v1.27, v1.29, v1.32 and
#   v1.37, and a policy version pinned below keeps the list of its time.
# custom:
#   severity: high
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove the sysctl from spec.securityContext.sysctls, or have the node tuned instead.
#   pss: {check: Sysctls, level: baseline, fields: ["spec.securityContext.sysctls[*].name"]}
package vgate.rules.security_sysctls

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.pss.failure
import data.vgate.lib.pss.minor
import data.vgate.lib.workload.judged_specs

# pod-security admission's sysctlsAllowedV1Dot0 .. V1Dot37: each name with the version it became safe in.
safe_since := {
	"kernel.shm_rmid_forced": 0,
	"net.ipv4.ip_local_port_range": 0,
	"net.ipv4.tcp_syncookies": 0,
	"net.ipv4.ping_group_range": 0,
	"net.ipv4.ip_unprivileged_port_start": 0,
	"net.ipv4.ip_local_reserved_ports": 27,
	"net.ipv4.tcp_keepalive_time": 29,
	"net.ipv4.tcp_fin_timeout": 29,
	"net.ipv4.tcp_keepalive_intvl": 29,
	"net.ipv4.tcp_keepalive_probes": 29,
	"net.ipv4.tcp_rmem": 32,
	"net.ipv4.tcp_wmem": 32,
	"net.ipv4.tcp_slow_start_after_idle": 37,
	"net.ipv4.tcp_notsent_lowat": 37,
}

safe(name) if minor >= safe_since[name]

deny contains failure(judged.where, "forbidden sysctls", concat(", ", names), "baseline") if {
	some judged in judged_specs
	names := [s.name | some s in object.get(judged.spec, ["securityContext", "sysctls"], []); not safe(s.name)]
	count(names) > 0
}
