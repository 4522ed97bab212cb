"""QoS memory (and CPU) requests and limits, so a pod lands in the class its queue needs.

Kubernetes derives a pod's QoS class from its containers' cpu/memory requests and limits;
vgate chooses the class first (annotation, queue, or what Kubernetes would compute) and then
fills in what is missing so the pod really is of that class. It only adds or raises to match:
a value the user set is never lowered, so an explicit limit always wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from .config import QOS_CLASSES, Config
from .quantity import parse_quantity

QOS_ANNOTATION = "vgate.io/qos-class"
COMPUTE = ("cpu", "memory")


def containers_of(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Containers and init containers (sidecars included): all count towards the QoS class."""
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict):
                yield container


def kubernetes_qos(spec: dict[str, Any]) -> str:
    """The class Kubernetes would give this pod spec (pkg/apis/core/helper/qos)."""
    any_set = False
    guaranteed = True
    for container in containers_of(spec):
        resources = container.get("resources") or {}
        requests = _positive(resources.get("requests"))
        limits = _positive(resources.get("limits"))
        any_set = any_set or bool(requests) or bool(limits)
        if set(limits) != set(COMPUTE):
            guaranteed = False
        if any(name in limits and value != limits[name] for name, value in requests.items()):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def requested_qos(annotations: dict[str, str], config: Config) -> str | None:
    """The class asked for by annotation, when the config lets workloads ask and it is a real class."""
    value = annotations.get(QOS_ANNOTATION)
    return value if config.qos.honor_annotation and value in QOS_CLASSES else None


def apply_qos(spec: dict[str, Any], qos_class: str, config: Config) -> dict[str, dict[str, str]]:
    """Fill in requests/limits in place so the spec is of ``qos_class``; BestEffort adds nothing.

    Returns what came from the config's defaults rather than the container's own values (container
    name -> resource -> quantity), so the answer can say so: a GPU job that set nothing otherwise
    runs on the default 1 CPU and 4Gi without a word."""
    defaulted: dict[str, dict[str, str]] = {}
    if qos_class == "Guaranteed":
        defaults = {"cpu": config.qos.guaranteed_cpu, "memory": config.qos.guaranteed_memory}
        for container in containers_of(spec):
            if given := _make_guaranteed(container, defaults):
                defaulted[str(container.get("name"))] = given
    elif qos_class == "Burstable":
        for container in containers_of(spec):
            _give_memory_floor(container, config.qos.burstable_memory_request, config.qos.burstable_memory_limit)
    return defaulted


def _make_guaranteed(container: dict[str, Any], defaults: dict[str, str]) -> dict[str, str]:
    """requests == limits for cpu and memory: the limit, else the request, else the default (returned)."""
    resources = _resources(container)
    given = {}
    for name in COMPUTE:
        value = resources["limits"].get(name) or resources["requests"].get(name)
        if not value:
            value = given[name] = defaults[name]
        resources["limits"][name] = value
        resources["requests"][name] = value
    return given


def _give_memory_floor(container: dict[str, Any], default_request: str, default_limit: str) -> None:
    """A memory request (default) and a limit (default, never below the request)."""
    resources = _resources(container)
    requests, limits = resources["requests"], resources["limits"]
    try:
        if "memory" not in requests:
            existing_limit = limits.get("memory")
            too_low = existing_limit is not None and parse_quantity(existing_limit) < parse_quantity(default_request)
            requests["memory"] = existing_limit if too_low else default_request
        if "memory" not in limits:
            request = requests["memory"]
            limits["memory"] = request if parse_quantity(request) > parse_quantity(default_limit) else default_limit
    except ValueError:
        return  # a quantity the API server would reject anyway: leave it to the API server to say so


def _resources(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = container["resources"] = {}
    for key in ("requests", "limits"):
        if not isinstance(resources.get(key), dict):
            resources[key] = {}
    return resources


def _positive(quantities: Any) -> dict[str, Decimal]:
    """cpu/memory quantities above zero; Kubernetes ignores zero requests for the QoS class."""
    if not isinstance(quantities, dict):
        return {}
    result = {}
    for name in COMPUTE:
        if name in quantities:
            try:
                value = parse_quantity(quantities[name])
            except ValueError:
                continue
            if value > 0:
                result[name] = value
    return result
