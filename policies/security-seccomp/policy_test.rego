package vgate.rules_test.security_seccomp

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "security_seccomp"

with_type(path, type) := testing.restricted([{"op": "add", "path": path, "value": {"type": type}}])

without_pod_profile(patch) := testing.restricted(array.concat([{"op": "remove", "path": "/securityContext/seccompProfile"}], patch))

test_allows_runtime_default_and_localhost_on_the_pod if {
	every type in ["RuntimeDefault", "Localhost"] {
		count(testing.denials(rule, with_type("/securityContext/seccompProfile", type))) == 0
	}
}

test_denies_unconfined_at_baseline if {
	testing.levels(rule, with_type("/securityContext/seccompProfile", "Unconfined")) == {
		`Pod: seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")`: "baseline",
	}
	testing.levels(rule, with_type("/containers/0/securityContext/seccompProfile", "Unconfined")) == {
		`Pod: seccompProfile (container "main" must not set securityContext.seccompProfile.type to "Unconfined")`: "baseline",
	}
}

test_baseline_names_only_who_set_a_forbidden_type if {
	pod_only := testing.restricted([
		{"op": "add", "path": "/securityContext/seccompProfile", "value": {"type": "Unconfined"}},
		{"op": "add", "path": "/containers/0/securityContext/seccompProfile", "value": {"type": "RuntimeDefault"}},
	])
	testing.levels(rule, pod_only) == {
		`Pod: seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")`: "baseline",
	}
	two := without_pod_profile([{"op": "add", "path": "/containers/-", "value": {
		"name": "sidecar", "image": "registry.example.com/sidecar:1",
		"securityContext": {"seccompProfile": {"type": "Unconfined"}},
	}}])
	testing.levels(rule, two) == {
		`Pod: seccompProfile (container "sidecar" must not set securityContext.seccompProfile.type to "Unconfined")`: "baseline",
		`Pod: seccompProfile (pod or container "main" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`: "restricted",
	}
}

test_restricted_requires_a_profile_on_the_pod_or_every_container if {
	testing.levels(rule, without_pod_profile([])) == {
		`Pod: seccompProfile (pod or container "main" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`: "restricted",
	}
	count(testing.denials(rule, without_pod_profile([{
		"op": "add", "path": "/containers/0/securityContext/seccompProfile",
		"value": {"type": "RuntimeDefault"},
	}]))) == 0
}

test_windows_pods_are_exempt_from_restricted_from_v1_25 if {
	windows := without_pod_profile([{"op": "add", "path": "/os", "value": {"name": "windows"}}])
	count(testing.denials(rule, windows)) == 0
	count(testing.denials_under(rule, windows, testing.at_version("v1.24"))) == 1
}

annotated(key, value) := json.patch(without_pod_profile([]), [{
	"op": "add", "path": "/request/object/metadata/annotations",
	"value": {key: value},
}])

test_below_v1_19_the_annotations_count_and_nothing_is_required if {
	old := testing.at_version("v1.18")
	every value in ["runtime/default", "docker/default", "localhost/profile.json"] {
		count(testing.denials_under(rule, annotated("seccomp.security.alpha.kubernetes.io/pod", value), old)) == 0
	}
	testing.levels_under(rule, annotated("container.seccomp.security.alpha.kubernetes.io/main", "unconfined"), old) == {
		`Pod: seccompProfile (forbidden annotations container.seccomp.security.alpha.kubernetes.io/main="unconfined")`: "baseline",
	}
	count(testing.denials_under(rule, with_type("/securityContext/seccompProfile", "Unconfined"), old)) == 0
}
