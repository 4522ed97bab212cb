package vgate.rules_test.security_added_capabilities

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_added_capabilities"

with_capabilities(capabilities) := testing.pod({}, testing.container_spec([{
	"op": "add", "path": "/securityContext",
	"value": {"capabilities": capabilities},
}]))

pss := json.patch(testing.config, [{"op": "replace", "path": "/security/allowedCapabilities", "value": null}])

test_baseline_allows_the_default_set_and_nothing_else if {
	every allowed in [
		"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
		"SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
	] {
		levels := testing.levels_under(rule, with_capabilities({"add": [allowed], "drop": ["ALL"]}), pss)
		not "baseline" in {level | some level in levels}
	}
	every forbidden in ["SYS_ADMIN", "NET_RAW", "NET_ADMIN", "SYS_PTRACE", "CAP_CHOWN", "chown", "ALL"] {
		levels := testing.levels_under(rule, with_capabilities({"add": [forbidden], "drop": ["ALL"]}), pss)
		some msg, "baseline" in levels
		contains(msg, sprintf(`Pod: non-default capabilities (container "main" must not include %q in securityContext.capabilities.add)`, [forbidden]))
	}
}

test_a_configured_list_is_stricter_than_the_standard if {
	# testing.config allows only NET_BIND_SERVICE, as vgate did before the standard.
	some msg, "baseline" in testing.levels(rule, with_capabilities({"add": ["CHOWN"], "drop": ["ALL"]}))
	contains(msg, `must not include "CHOWN"`)
	count(testing.levels(rule, with_capabilities({"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}))) == 0
}

test_restricted_requires_dropping_all if {
	levels := testing.levels_under(rule, with_capabilities({"drop": ["NET_RAW"]}), pss)
	levels == {`Pod: unrestricted capabilities (container "main" must set securityContext.capabilities.drop=["ALL"])`: "restricted"}
	count(testing.levels_under(rule, with_capabilities({"drop": ["ALL"]}), pss)) == 0
	count(testing.levels_under(rule, with_capabilities({"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}), pss)) == 0
}

test_restricted_allows_adding_only_net_bind_service if {
	levels := testing.levels_under(rule, with_capabilities({"drop": ["ALL"], "add": ["CHOWN", "NET_BIND_SERVICE"]}), pss)
	levels == {`Pod: unrestricted capabilities (container "main" must not include "CHOWN" in securityContext.capabilities.add)`: "restricted"}
}

test_one_problem_is_said_once if {
	levels := testing.levels_under(rule, with_capabilities({"add": ["SYS_ADMIN"]}), pss)
	count(levels) == 2 # SYS_ADMIN (baseline) and no drop ALL (restricted): two problems, not three
	some msg, "restricted" in levels
	not contains(msg, "SYS_ADMIN")
}

test_restricted_is_judged_from_v1_22_and_not_for_windows_pods_from_v1_25 if {
	old := json.patch(pss, [{"op": "add", "path": "/podSecurity", "value": {"version": "v1.21", "namespaces": []}}])
	count(testing.levels_under(rule, with_capabilities({}), old)) == 0
	windows := json.patch(with_capabilities({}), [{"op": "add", "path": "/request/object/spec/os", "value": {"name": "windows"}}])
	count(testing.levels_under(rule, windows, pss)) == 0
	v24 := json.patch(pss, [{"op": "add", "path": "/podSecurity", "value": {"version": "v1.24", "namespaces": []}}])
	count(testing.levels_under(rule, windows, v24)) == 1
}

test_every_container_list_and_job_template_is_judged if {
	spec := {
		"initContainers": [{"name": "setup", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}}}],
		"containers": [{"name": "main", "securityContext": {"capabilities": {"drop": ["ALL"]}}}],
	}
	some msg, "baseline" in testing.levels_under(rule, testing.job({}, [spec]), pss)
	startswith(msg, `Job task[0] t0: non-default capabilities (container "setup" must not include "SYS_ADMIN"`)
	added := [{"name": "debugger", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"], "drop": ["ALL"]}}}]
	some debug_msg, "baseline" in testing.levels_under(rule, testing.debug(testing.container_spec([]), [], added), pss)
	contains(debug_msg, `container "debugger" must not include "SYS_PTRACE"`)
}
