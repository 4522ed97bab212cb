package vgate.rules_test.security_sysctls

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_sysctls"

with_sysctls(names) := testing.restricted([{
	"op": "add", "path": "/securityContext/sysctls",
	"value": [{"name": name, "value": "1"} | some name in names],
}])

test_allows_the_safe_list if {
	count(testing.denials(rule, with_sysctls([
		"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
		"net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem", "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat",
	]))) == 0
}

test_denies_the_others if {
	testing.levels(rule, with_sysctls(["kernel.msgmax", "net.core.somaxconn", "kernel.shm_rmid_forced"])) == {
		"Pod: forbidden sysctls (kernel.msgmax, net.core.somaxconn)": "baseline",
	}
}

test_the_safe_list_grows_by_version if {
	every case in [
		["net.ipv4.ip_local_reserved_ports", "v1.26", "v1.27"],
		["net.ipv4.tcp_keepalive_time", "v1.28", "v1.29"],
		["net.ipv4.tcp_rmem", "v1.31", "v1.32"],
		["net.ipv4.tcp_notsent_lowat", "v1.36", "v1.37"],
	] {
		count(testing.denials_under(rule, with_sysctls([case[0]]), testing.at_version(case[1]))) == 1
		count(testing.denials_under(rule, with_sysctls([case[0]]), testing.at_version(case[2]))) == 0
	}
}
