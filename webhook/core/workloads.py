"""Which objects vgate handles (the table is ``kinds.KINDS``), and where their pod specs and labels live.

Three kinds carry scheduling intent and are mutated and validated: core Pods, Volcano
``batch.volcano.sh/v1alpha1`` Jobs (one pod template per task) and ``scheduling.volcano.sh/v1beta1``
PodGroups (queue and priority only). The rest are validated only: pod controllers (their template
is judged as the pod it will create, see ``pod_templates``), ``kubectl debug``'s UPDATE of the
``pods/ephemeralcontainers`` subresource (the containers it adds), and an in-place resize's UPDATE of
``pods/resize`` (its new resources). Everything else is allowed untouched.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .admission import AdmissionRequest
from .kinds import BY_KEY, KINDS, POD_SUBRESOURCES, Workload

if TYPE_CHECKING:
    from .config import Config


MUTATED = tuple(kind.workload for kind in KINDS if kind.mutated)
HANDLED_KINDS = tuple(BY_KEY)  # (group, version, kind) of everything vgate judges


def classify(request: AdmissionRequest) -> Workload | None:
    """The workload kind of a request (``kinds.KINDS``), or None for what vgate leaves alone."""
    kind = BY_KEY.get((request.group, request.version, request.kind))
    if kind is None:
        return None
    if request.sub_resource:
        if kind.subresource:  # a Binding written as pods/binding
            return kind.workload if kind.subresource == f"{request.resource}/{request.sub_resource}" else None
        judged = POD_SUBRESOURCES.get(request.sub_resource) if kind.workload is Workload.POD else None
        return judged[0] if judged else None
    return kind.workload


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def set_annotation(obj: dict[str, Any], key: str, value: str) -> None:
    """Set one annotation, creating ``metadata`` and ``metadata.annotations`` when missing."""
    metadata = obj.setdefault("metadata", {})
    if not isinstance(metadata.get("annotations"), dict):
        metadata["annotations"] = {}
    metadata["annotations"][key] = value


def task_templates(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a Volcano Job's tasks that have a usable ``spec``."""
    tasks = (job.get("spec") or {}).get("tasks")
    if not isinstance(tasks, list):
        return []
    templates = [t.get("template") for t in tasks if isinstance(t, dict)]
    return [t for t in templates if isinstance(t, dict) and isinstance(t.get("spec"), dict)]


# Where each pod controller keeps its template, as kinds.KINDS says (a CronJob's is one level down).
_CONTROLLER_TEMPLATES = {k.kind: k.pod_specs for k in KINDS if k.workload is Workload.POD_CONTROLLER}


def template_of(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The pod template of a controller object, where its registry entry says it is."""
    spec = (obj or {}).get("spec")
    if _CONTROLLER_TEMPLATES.get(kind) == "jobTemplate":
        spec = ((spec or {}).get("jobTemplate") or {}).get("spec") if isinstance(spec, dict) else None
    template = spec.get("template") if isinstance(spec, dict) else None
    return template if isinstance(template, dict) else None


def is_exempt(namespace: str, config: "Config") -> bool:
    """Namespaces vgate leaves alone entirely: the platform's, by exact name, and any globs given apart."""
    document = config.document
    return namespace in document["exemptNamespaces"] or matches_globs(namespace, document["exemptNamespaceGlobs"])


def matches_globs(name: str, patterns: Iterable[str]) -> bool:
    """Namespace patterns are shell globs: ``*``, ``research-*``, ``team-?``."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector match; an empty selector matches everything, as in Kubernetes."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True
