"""/mutate: inject the Volcano queue, scheduler, priority class and QoS resources.

The object is changed on a copy and the JSON Patch is the difference (``jsonpatch.make_patch``),
so pointer escaping (``~0``/``~1``) and RFC 6902 are the library's job, and an object that
already complies yields an empty patch. That is also what makes mutation idempotent: every step
below only fills in what is missing, so a second pass finds nothing to fill.

Only CREATE is mutated. On UPDATE a pod's resources, priority, schedulerName and nodeSelector
are immutable and a Volcano Job's spec is frozen but for scaling; the queue and QoS decisions
were recorded at CREATE and rewriting them on a running workload would misstate them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from .admission import AdmissionRequest
from .config import Config
from .qos import QOS_ANNOTATION, apply_qos, kubernetes_qos, requested_qos
from .queues import QUEUE_ANNOTATION, resolve_queue
from .workloads import (Workload, annotations_of, classify, labels_of, matches_globs,
                        set_annotation, task_templates)

_DEFAULT_SCHEDULERS = (None, "", "default-scheduler")


@dataclass
class Mutation:
    """The patch for one request and what was decided, for the response and the audit trail."""

    patch: list[dict[str, Any]] = field(default_factory=list)
    queue: str | None = None
    qos_classes: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return [op["path"] for op in self.patch]


def mutate(request: AdmissionRequest, config: Config) -> Mutation:
    """The mutation for one admission request; an empty Mutation when nothing applies."""
    workload = classify(request)
    if workload is None or request.operation != "CREATE" or request.object is None:
        return Mutation()
    original = request.object
    mutated = copy.deepcopy(original)
    namespace = request.namespace
    if workload is Workload.POD:
        result = _mutate_pod(mutated, namespace, config)
    elif workload is Workload.VOLCANO_JOB:
        result = _mutate_job(mutated, namespace, config)
    else:
        result = _mutate_pod_group(mutated, namespace, config)
    result.patch = jsonpatch.make_patch(original, mutated).patch
    return result


def _mutate_pod(pod: dict[str, Any], namespace: str, config: Config) -> Mutation:
    annotations = annotations_of(pod)
    queue = resolve_queue(config, namespace, labels_of(pod), annotations.get(QUEUE_ANNOTATION))
    if annotations.get(QUEUE_ANNOTATION) != queue:
        set_annotation(pod, QUEUE_ANNOTATION, queue)
    spec = pod.setdefault("spec", {})
    if matches_globs(namespace, config.volcano["namespaces"]) and spec.get("schedulerName") in _DEFAULT_SCHEDULERS:
        spec["schedulerName"] = config.volcano["schedulerName"]
    _inject_priority(spec, queue, config, with_value=True)
    qos_class = _inject_qos(pod, annotations_of(pod), queue, config)
    return Mutation(queue=queue, qos_classes=[qos_class])


def _mutate_job(job: dict[str, Any], namespace: str, config: Config) -> Mutation:
    spec = job.setdefault("spec", {})
    queue = resolve_queue(config, namespace, labels_of(job), spec.get("queue"))
    spec["queue"] = queue
    if matches_globs(namespace, config.volcano["namespaces"]) and not spec.get("schedulerName"):
        spec["schedulerName"] = config.volcano["schedulerName"]
    _inject_priority(spec, queue, config, with_value=False)
    job_request = annotations_of(job)
    classes = [_inject_qos(template, {**job_request, **annotations_of(template)}, queue, config)
               for template in task_templates(job)]
    return Mutation(queue=queue, qos_classes=classes)


def _mutate_pod_group(group: dict[str, Any], namespace: str, config: Config) -> Mutation:
    spec = group.setdefault("spec", {})
    queue = resolve_queue(config, namespace, labels_of(group), spec.get("queue"))
    spec["queue"] = queue
    _inject_priority(spec, queue, config, with_value=False)
    return Mutation(queue=queue)


def _inject_priority(spec: dict[str, Any], queue: str, config: Config, *, with_value: bool) -> None:
    """Set the queue's priority class when none (or only the cluster's global default) is set.

    The built-in Priority plugin has already resolved ``spec.priority`` from whatever class the
    pod had before webhooks ran, so a pod needs the value set too (``with_value``).
    """
    definition = config.queue(queue)
    if definition is None or definition.priority_class is None:
        return
    current = spec.get("priorityClassName")
    if current and current != config.global_default_priority_class:
        return
    spec["priorityClassName"] = definition.priority_class
    if with_value:
        spec["priority"] = config.priority_values[definition.priority_class]


def _inject_qos(holder: dict[str, Any], annotations: dict[str, str], queue: str, config: Config) -> str:
    """Decide the QoS class of a pod (or pod template), fill in resources, record the class."""
    spec = holder.setdefault("spec", {})
    definition = config.queue(queue)
    qos_class = (requested_qos(annotations, config)
                 or (definition.qos_class if definition else None)
                 or kubernetes_qos(spec))
    apply_qos(spec, qos_class, config)
    if annotations_of(holder).get(QOS_ANNOTATION) != qos_class:
        set_annotation(holder, QOS_ANNOTATION, qos_class)
    return qos_class
