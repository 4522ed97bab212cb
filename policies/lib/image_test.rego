package vgate.lib.image_test

import rego.v1

import data.vgate.lib.image

# distribution/reference's own normalization cases (normalize_test.go, splitDockerDomain), and the
# hosts a Docker Hub allow-list must not mistake for Hub namespaces.
test_references_normalize_as_the_runtime_does if {
	every case in [
		["nginx", "docker.io/library/nginx"],
		["nginx:1.27", "docker.io/library/nginx:1.27"],
		["library/nginx", "docker.io/library/nginx"],
		["docker.io/nginx", "docker.io/library/nginx"],
		["docker.io/library/nginx", "docker.io/library/nginx"],
		["index.docker.io/nginx", "docker.io/library/nginx"],
		["index.docker.io/team/app:1", "docker.io/team/app:1"],
		["team/app", "docker.io/team/app"],
		["team/app:1.0", "docker.io/team/app:1.0"],
		["localhost/app", "localhost/app"],
		["localhost:5000/app:1", "localhost:5000/app:1"],
		["127.0.0.1:5000/app", "127.0.0.1:5000/app"],
		["[::1]:5000/app:2", "[::1]:5000/app:2"],
		["registry.example.com/team/app:1", "registry.example.com/team/app:1"],
		["registry.example.com:5000/app", "registry.example.com:5000/app"],
		["Evilhost/x:1", "Evilhost/x:1"],
		["EVIL/x", "EVIL/x"],
		["eVil/x/y:1", "eVil/x/y:1"],
		["xn--n3h.com/app", "xn--n3h.com/app"],
		["app@sha256:abc", "docker.io/library/app@sha256:abc"],
		["app:1@sha256:abc", "docker.io/library/app:1@sha256:abc"],
		["localhost:5000/app@sha256:abc", "localhost:5000/app@sha256:abc"],
	] {
		image.normalized(case[0]) == case[1]
	}
}

test_a_port_is_not_a_tag if {
	ref := image.reference("registry.example.com:5000/app")
	ref.domain == "registry.example.com:5000"
	ref.tag == ""
}

test_an_upper_case_first_component_is_a_host if {
	image.reference("Evilhost/x:1").domain == "Evilhost"
	image.reference("evilhost/x:1").domain == "docker.io"
}

test_pinned_needs_a_digest if {
	image.pinned("app@sha256:abc")
	not image.pinned("app:1")
}

# pinned and tag read their part alone (the rule asks only these for most pods): they must say what the
# full reference says, for every shape of reference above.
test_pinned_and_tag_agree_with_the_full_reference if {
	every name in [
		"nginx", "nginx:latest", "team/app:1.0", "localhost:5000/app", "localhost:5000/app:1",
		"[::1]:5000/app:2", "registry.example.com:5000/app", "app@sha256:abc", "app:1@sha256:abc",
		"localhost:5000/app@sha256:abc", "app@", "a:b:c", "",
	] {
		{true | image.pinned(name)} == {true | image.reference(name).digest != ""} # pinned is undefined, not false
		image.tag(name) == image.reference(name).tag
	}
}
