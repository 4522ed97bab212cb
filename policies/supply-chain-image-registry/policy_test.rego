package vgate.rules_test.supply_chain_image_registry

import rego.v1

import data.vgate.lib.testing
import data.vgate.rules.supply_chain_image_registry as rule

# The rule under test (its folder's name, as its package writes it).
rule_name := "supply_chain_image_registry"

running(labels, image) := testing.pod(labels, {"containers": [{"name": "app", "image": image}]})

digest := "registry.example.com/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

test_denies_registry_not_allowed if {
	some violation in testing.denials(rule_name, running({}, "docker.io/library/nginx:1.27"))
	contains(violation, `image "docker.io/library/nginx:1.27" from a registry not allowed`)
}

test_any_registry_when_the_list_is_empty if {
	config := json.patch(testing.config, [{"op": "replace", "path": "/images/allowedRegistries", "value": []}])
	result := rule.deny with input as running({}, "nginx:1.27") with data.vgate.config as config
	count(result) == 0
}

test_denies_sensitive_image_without_digest if {
	some violation in testing.denials(rule_name, running(
		testing.sensitive,
		"registry.example.com/app:1.0",
	))
	contains(violation, "without a digest")
}

test_allows_sensitive_image_with_digest if {
	count(testing.denials(rule_name, running(testing.sensitive, digest))) == 0
}

test_warns_on_latest_and_untagged_but_not_on_registry_ports if {
	count(testing.warnings(rule_name, running({}, "registry.example.com/app:latest"))) == 1
	count(testing.warnings(rule_name, running({}, "registry.example.com/app"))) == 1
	count(testing.warnings(rule_name, running({}, "registry.example.com:5000/app:2.1"))) == 0
	count(testing.denials(rule_name, running({}, "registry.example.com/app:latest"))) == 0
}

test_denies_an_ephemeral_container_from_another_registry if {
	added := [{"name": "debugger", "image": "docker.io/nicolaka/netshoot:latest"}]
	some violation in testing.denials(rule_name, testing.debug(testing.container_spec([]), [], added))
	contains(violation, "debugger")
}

# kubectl set image: an UPDATE of a running pod that changes one container's image.
image_update(before, after) := json.patch(
	testing.review({"group": "", "version": "v1", "kind": "Pod"}, "UPDATE", "ml-training", testing.running(
		{
			"containers": [{"name": "main", "image": after}, {"name": "side", "image": "registry.example.com/side:1"}],
		},
		[],
	)),
	[{"op": "add", "path": "/request/oldObject", "value": testing.running(
		{"containers": [
			{"name": "main", "image": before}, {"name": "side", "image": "registry.example.com/side:1"},
		]},
		[],
	)}],
)

test_an_update_that_changes_an_image_to_another_registry_is_denied if {
	update := image_update("registry.example.com/app:1", "docker.io/attacker/app:1")
	some violation in testing.denials(rule_name, update)
	contains(violation, `container main of pod uses image "docker.io/attacker/app:1"`)
}

test_an_update_that_keeps_the_images_is_not_judged_again if {
	count(testing.denials(rule_name, image_update("docker.io/old:1", "docker.io/old:1"))) == 0
}

allowing(entries, image) := result if {
	config := json.patch(testing.config, [{"op": "replace", "path": "/images/allowedRegistries", "value": entries}])

	# regal ignore:with-outside-test-context
	result := rule.deny with input as running({}, image) with data.vgate.config as config
}

# Gatekeeper library's allowedrepos bypasses, and their kin: a prefix is matched by whole segments.
test_an_entry_matches_whole_path_segments_only if {
	every case in [
		[["registry.example.com"], "registry.example.com/app:1.0", 0],
		[["registry.example.com/"], "registry.example.com/app:1.0", 0],
		[["registry.example.com"], "registry.example.com.evil.io/app:1.0", 1],
		[["registry.example.com/"], "registry.example.com.evil.io/app:1.0", 1],
		[["registry.example.com"], "registry.example.com:5000/app:1.0", 1],
		[["registry.example.com"], "registry.example.comevil/app:1.0", 1],
		[["registry.example.com/team"], "registry.example.com/team/app:1.0", 0],
		[["registry.example.com/team"], "registry.example.com/team-evil/app:1.0", 1],
		[["registry.example.com/team/app"], "registry.example.com/team/app:1.0", 0],
		[["registry.example.com/team/app"], concat("", ["registry.example.com/team/app@sha256:", sha]), 0],
		[["registry.example.com/team/app"], "registry.example.com/team/app-evil:1.0", 1],
		[["registry.example.com"], "nginx:1.27", 1],
		[["docker.io"], "nginx:1.27", 0],
		[["docker.io/library"], "nginx:1.27", 0],
		[["docker.io/library"], "evil/miner:1.0", 1],
		[["docker.io/evil"], "evil/miner:1.0", 0],
		[["localhost:5000"], "localhost:5000/app:1.0", 0],
		[["localhost"], "localhost/app:1.0", 0],
		[["registry.example.com"], "registry.example.com", 1],
		# The runtime reads an upper-case first component as a registry host, never a Hub namespace.
		[["docker.io/"], "Evilhost/x:1", 1],
		[["docker.io"], "EVIL/miner:1", 1],
		[["docker.io"], "index.docker.io/team/app:1", 0],
		[["docker.io/library"], "docker.io/nginx:1", 0],
		[["docker.io"], "docker.io.evil.io/x:1", 1],
	] {
		count(allowing(case[0], case[1])) == case[2]
	}
}

sha := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
