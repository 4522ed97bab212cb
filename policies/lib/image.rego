# METADATA
# title: image references
# description: |
#   Image references read as the container runtimes read them (github.com/distribution/reference,
#   ParseNormalizedNamed and its splitDockerDomain), so a rule sees the registry the kubelet will
#   pull from. The first path component is a registry host when it contains "." or ":", is
#   "localhost", or has an upper-case letter (repository paths are lower-case, so "Evilhost/x" is a
#   host called Evilhost); otherwise the image is on Docker Hub: "nginx" is docker.io/library/nginx,
#   "team/app" docker.io/team/app, and index.docker.io is docker.io. A tag follows the last ":" of
#   the last path component (an earlier ":" is a port); a digest follows "@".
package vgate.lib.image

import rego.v1

# {"domain", "path", "tag", "digest"} of ``image`` ("" where absent); "name" is domain/path.
reference(image) := {
	"domain": domain,
	"path": path,
	"name": concat("/", [domain, path]),
	"tag": tag(image),
	"digest": _digest(image),
} if {
	named := _without_tag(_before_digest(image))
	split_name := _split_domain(named)
	domain := _alias(split_name[0])
	path := _library(domain, split_name[1])
}

# The full reference, normalized: "nginx:1" is "docker.io/library/nginx:1".
normalized(image) := concat("", [ref.name, _suffix(":", ref.tag), _suffix("@", ref.digest)]) if {
	ref := reference(image)
}

# Pinned by a digest: a rule asking only this need not parse the rest of the reference.
pinned(image) if _digest(image) != ""

# The tag ("" without one), read alone for the same reason.
tag(image) := _tag(_before_digest(image))

_suffix(_, "") := ""

_suffix(separator, value) := concat("", [separator, value]) if value != ""

_before_digest(image) := split(image, "@")[0]

_digest(image) := substring(image, indexof(image, "@") + 1, -1) if contains(image, "@")

_digest(image) := "" if not contains(image, "@")

# The tag is after a ":" in the last path component only.
_last(named) := parts[count(parts) - 1] if parts := split(named, "/")

_tag(named) := split(_last(named), ":")[1] if contains(_last(named), ":")

_tag(named) := "" if not contains(_last(named), ":")

_without_tag(named) := substring(named, 0, (count(named) - count(_last(named))) + indexof(_last(named), ":")) if {
	contains(_last(named), ":")
}

_without_tag(named) := named if not contains(_last(named), ":")

_split_domain(named) := ["docker.io", named] if not contains(named, "/")

_split_domain(named) := [first, substring(named, count(first) + 1, -1)] if {
	contains(named, "/")
	first := split(named, "/")[0]
	_is_host(first)
}

_split_domain(named) := ["docker.io", named] if {
	contains(named, "/")
	not _is_host(split(named, "/")[0])
}

_is_host(component) if contains(component, ".")

_is_host(component) if contains(component, ":")

_is_host("localhost") := true

_is_host(component) if lower(component) != component

_alias("index.docker.io") := "docker.io"

_alias(domain) := domain if domain != "index.docker.io"

# Docker Hub's official images live under library/.
_library(domain, path) := concat("/", ["library", path]) if _official(domain, path)

_library(domain, path) := path if not _official(domain, path)

_official(domain, path) if {
	domain == "docker.io"
	not contains(path, "/")
}
