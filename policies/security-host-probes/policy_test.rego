package vgate.rules_test.security_host_probes

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_host_probes"

with_handler(field, handler) := testing.restricted([{
	"op": "add", "path": concat("/", ["/containers/0", field]),
	"value": handler,
}])

test_denies_a_host_on_any_probe_or_hook if {
	every case in [
		["livenessProbe", {"httpGet": {"host": "10.0.0.1", "port": 80}}],
		["readinessProbe", {"tcpSocket": {"host": "10.0.0.1", "port": 80}}],
		["startupProbe", {"httpGet": {"host": "10.0.0.1", "port": 80}}],
		["lifecycle", {"postStart": {"httpGet": {"host": "10.0.0.1", "port": 80}}}],
		["lifecycle", {"preStop": {"tcpSocket": {"host": "10.0.0.1", "port": 80}}}],
	] {
		testing.levels(rule, with_handler(case[0], case[1])) == {
			`Pod: probe or lifecycle host (container "main" uses probe or lifecycle host "10.0.0.1")`: "baseline",
		}
	}
}

test_allows_probes_without_host if {
	count(testing.denials(rule, with_handler("livenessProbe", {"httpGet": {"port": 80}}))) == 0
	count(testing.denials(rule, with_handler("livenessProbe", {"httpGet": {"host": "", "port": 80}}))) == 0
}

test_is_judged_from_v1_34 if {
	probe := with_handler("livenessProbe", {"httpGet": {"host": "10.0.0.1", "port": 80}})
	count(testing.denials_under(rule, probe, testing.at_version("v1.33"))) == 0
	count(testing.denials_under(rule, probe, testing.at_version("v1.34"))) == 1
}
