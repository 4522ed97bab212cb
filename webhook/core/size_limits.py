"""Bounded work per request: objects too large to judge are refused before any rule runs.

A tenant chooses the size of what it submits; the gateway's work (mutation, every rule, the
decision record) grows with it. Every pod spec a kind's handler names (a Pod's own, a
controller's template, a Volcano Job's tasks, a Spark application's driver and executor with
their sidecars) with more than ``server.maxContainersPerPod`` containers, and whatever count the
kind bounds besides (``KindHandler.limits``: a Volcano Job's tasks, ``server.maxTasksPerJob``),
is denied with the reason before the engine sees it, and not mutated.
"""

from __future__ import annotations

from typing import Any

from .config import Config
from .kind_handler import KindHandler

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def oversize(handler: KindHandler, obj: dict[str, Any] | None, config: Config) -> str | None:
    """Why ``obj`` is too large to judge, or None."""
    if obj is None or not isinstance(obj.get("spec"), dict):
        return None
    too_many = handler.limits(obj, config)
    if too_many:
        return too_many
    most = config.server.max_containers_per_pod
    for where, pod_spec in handler.pod_specs(obj):
        if isinstance(pod_spec, dict):
            count = sum(len(pod_spec[field]) for field in _CONTAINER_LISTS if isinstance(pod_spec.get(field), list))
            if count > most:
                return (f"{where} has {count} containers; the gateway judges at most {most} "
                        "(server.maxContainersPerPod)")
    return None
