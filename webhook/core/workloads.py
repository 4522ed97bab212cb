"""Reading Kubernetes objects the way every kind's handler does: labels, annotations, task templates,
namespace globs and label selectors. Which kinds vgate handles, and how, is ``kinds.KINDS``."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import Config


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


def is_exempt(namespace: str, config: "Config") -> bool:
    """Namespaces vgate leaves alone entirely: the platform's, by exact name, and any globs given apart."""
    return namespace in config.exempt_namespaces or matches_globs(namespace, config.exempt_namespace_globs)


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
