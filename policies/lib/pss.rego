# METADATA
# title: Pod Security Standards helpers
# description: |
#   What every Pod Security Standards check shares: the version it is judged at for this
#   request's namespace (podSecurity.version, or the first matching podSecurity.namespaces
#   entry's), each judged pod spec's containers by where they are, and messages in
#   pod-security admission's own shape ("Pod: <reason> (<detail>)"). A check yields
#   {"msg", "level"}: the level is the lowest at which the pod fails it; the namespace's
#   podSecurity modes turn that into deny, warn, audit or nothing (webhook/core/enforcement.py).
#   Checks follow staging/src/k8s.io/pod-security-admission/policy/check_*.go, version by version.
package vgate.lib.pss

import rego.v1

import data.vgate.lib.workload.first_for_namespace
import data.vgate.lib.workload.judged_containers
import data.vgate.lib.workload.obj

# The newest policy version whose checks differ from the one before (sysctls, v1.37): "latest".
latest_minor := 37

pod_security := data.vgate.config.podSecurity

namespace_entry := first_for_namespace(pod_security.namespaces, input.request.namespace)

version_name := object.get(namespace_entry, "version", pod_security.version)

version_name := pod_security.version if not namespace_entry

# The minor version the checks are judged at ("latest" is the newest; without podSecurity in the config, too).
# Rules compare it themselves (`minor >= 19`): a helper such as at_least(19) cost the RVM a call (~2 µs) in
# each of the ten checks that ask, on every evaluation.
default minor := 37

minor := latest_minor if version_name == "latest"

minor := to_number(trim_prefix(version_name, "v1.")) if version_name != "latest"

# Rules ask these two last in a body, after the checks that find nothing in most pods: each call costs
# the RVM a few µs, and a body that fails earlier never makes it (the same rule either way in Rego).
# A Windows pod (spec.os.name) is exempt from some restricted checks from v1.25 on.
windows_exempt(spec) if {
	minor >= 25
	spec.os.name == "windows"
}

# A pod in a user namespace (hostUsers: false) is relaxed from some checks from v1.35 on.
user_namespace_relaxed(spec) if {
	minor >= 35
	spec.hostUsers == false
}

# Each judged pod spec with its containers (or, for kubectl debug, the containers the request adds),
# by where: computed once per evaluation, in one pass per spec (not one per container).
container_groups[where] := {"spec": members[0].spec, "containers": [m.container | some m in members]} if {
	some where in {judged.where | some judged in judged_containers}
	members := [judged | some judged in judged_containers; judged.where == where]
}

# The subject is written into each message's format, not built by a helper: one call fewer per message.
failure("pod", reason, detail, level) := {"msg": sprintf("%s: %s (%s)", [obj.kind, reason, detail]), "level": level}

failure(where, reason, detail, level) := {
	"msg": sprintf("%s %s: %s (%s)", [obj.kind, where, reason, detail]),
	"level": level,
} if where != "pod"

quoted(names) := concat(", ", [sprintf("%q", [name]) | some name in names])

plural(word, items) := word if count(items) == 1

plural(word, items) := concat("", [word, "s"]) if count(items) != 1

# The verb for them: "container "a" uses", "containers "a", "b" use".
uses(items) := "uses" if count(items) == 1

uses(items) := "use" if count(items) != 1

# `container "a"` or `containers "a", "b"`. One name (most pods have one container) is one sprintf:
# the general form costs the RVM three calls more.
containers_named(names) := sprintf("container %q", names) if count(names) == 1

containers_named(names) := sprintf("containers %s", [quoted(names)]) if count(names) != 1

# "pod", `container "a"`, or "pod and container "a"": who set a forbidden value.
setters(true, names) := "pod" if count(names) == 0

setters(false, names) := containers_named(names) if count(names) > 0

setters(true, names) := concat(" and ", ["pod", containers_named(names)]) if count(names) > 0
