"""Bounded work per request: objects too large to judge are refused before any rule runs.

A tenant chooses the size of what it submits; the gateway's work (mutation, every rule, the
decision record) grows with it. Pods of more than ``server.maxContainersPerPod`` containers and
Volcano Jobs of more than ``server.maxTasksPerJob`` tasks are denied with the reason, before the
engine sees them, and are not mutated.
"""

from __future__ import annotations

from typing import Any

from .config import Config
from .kinds import Workload
from .workloads import template_of

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def oversize(workload: Workload, obj: dict[str, Any] | None, kind: str, config: Config) -> str | None:
    """Why ``obj`` is too large to judge, or None."""
    limits = config.server
    spec = (obj or {}).get("spec")
    if not isinstance(spec, dict):
        return None
    if workload is Workload.VOLCANO_JOB:
        tasks: list[Any] = spec["tasks"] if isinstance(spec.get("tasks"), list) else []
        if len(tasks) > limits.max_tasks_per_job:
            return (f"it has {len(tasks)} tasks; the gateway judges at most {limits.max_tasks_per_job} "
                    "(server.maxTasksPerJob)")
        specs = [(task.get("template") or {}).get("spec") for task in tasks if isinstance(task, dict)]
    elif workload is Workload.POD_CONTROLLER:
        specs = [(template_of(obj, kind) or {}).get("spec")]
    else:
        specs = [spec]
    for pod_spec in specs:
        if isinstance(pod_spec, dict):
            count = sum(len(pod_spec[field]) for field in _CONTAINER_LISTS if isinstance(pod_spec.get(field), list))
            if count > limits.max_containers_per_pod:
                return (f"a pod spec of it has {count} containers; the gateway judges at most "
                        f"{limits.max_containers_per_pod} (server.maxContainersPerPod)")
    return None
