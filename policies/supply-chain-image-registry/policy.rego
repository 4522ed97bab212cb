# METADATA
# title: Images from allowed registries, pinned for sensitive workloads
# description: |
#   Images must come from a registry in images.allowedRegistries (when the list is set), matched
#   by whole path segments.
#   A sensitive workload must pin every image by digest: a tag can be moved to other code.
#   Any other workload using :latest or no tag gets a warning.
# custom:
#   severity: high
#   category: supply-chain
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.4 intrusion prevention"
#   remediation: Pull from an allowed registry; pin images as name@sha256:<digest>.
package vgate.rules.supply_chain_image_registry

import rego.v1

# Helpers one by one, not `import data.vgate.lib.workload`: regorus evaluates a whole package imported by name.
import data.vgate.lib.image.normalized
import data.vgate.lib.image.pinned
import data.vgate.lib.image.tag
import data.vgate.lib.workload.image_judged_containers
import data.vgate.lib.workload.image_of
import data.vgate.lib.workload.is_sensitive
import data.vgate.lib.workload.obj
import data.vgate.lib.workload.sensitive_label

registries := data.vgate.config.images.allowedRegistries

# The tag as the runtime reads it: a ":" before the last "/" is a registry port, not a tag.
untagged_or_latest(image) if {
	not pinned(image)
	tag(image) in {"", "latest"}
}

deny contains msg if {
	count(registries) > 0
	some judged in image_judged_containers
	image := image_of(judged.container)
	not from_allowed(image)
	msg := sprintf(
		"%s: container %s of %s uses image %q from a registry not allowed: pull from one of %v",
		[obj.kind, judged.container.name, judged.where, image, registries],
	)
}

deny contains msg if {
	is_sensitive
	some judged in image_judged_containers
	image := image_of(judged.container)
	not pinned(image)
	msg := sprintf(
		"%s is labelled %s but container %s of %s uses image %q without a digest: pin it as name@sha256:<digest>",
		[obj.kind, sensitive_label, judged.container.name, judged.where, image],
	)
}

warn contains msg if {
	not is_sensitive
	some judged in image_judged_containers
	image := image_of(judged.container)
	untagged_or_latest(image)
	msg := sprintf(
		"%s: container %s of %s uses image %q, which floats (:latest or no tag): pin a version or digest",
		[obj.kind, judged.container.name, judged.where, image],
	)
}

# An entry matches whole path segments of the image's normalized name (lib/image.rego: the registry
# the runtime pulls from), never a longer host or segment: "registry.example.com" allows
# "registry.example.com/app:1", never "registry.example.com.evil.io/app" or
# "registry.example.com:5000/app" (another registry); "registry.example.com/team" allows
# "registry.example.com/team/app", never "registry.example.com/team-evil/app". An entry naming a
# repository ("registry.example.com/team/app") also allows its tags and digests. "docker.io" allows
# "nginx" and "team/app" (Docker Hub), never "Evilhost/x" (a host, for the runtime).
from_allowed(image) if {
	name := normalized(image) # once, not once per allowed entry
	some entry in registries
	within(name, trim_right(entry, "/"))
}

within(name, prefix) if startswith(name, concat("", [prefix, "/"]))

within(name, prefix) if {
	contains(prefix, "/") # a repository, not a registry host (where ":" would start a port)
	some separator in [":", "@"]
	startswith(name, concat("", [prefix, separator]))
}
