"""/mutate: inject the Volcano queue, scheduler, priority class and QoS resources.

The object is changed on a copy and the JSON Patch is the difference between the two, taken only
over the fields vgate manages, key by key (pointers, and their ``~0``/``~1`` escaping, built by
jsonpointer), so an object that already complies yields an empty patch and a 4 KB pod costs
~0.05 ms, where ``jsonpatch.make_patch`` cost ~1 ms over the whole object and ~0.28 ms field by
field. Mutation is idempotent because every step only fills in what is missing.

Only CREATE is mutated. On UPDATE a pod's resources, priority, schedulerName and nodeSelector
are immutable and a Volcano Job's spec is frozen but for scaling; the queue and QoS decisions
were recorded at CREATE and rewriting them on a running workload would misstate them.

Reinvocation: the API server calls vgate again (``reinvocationPolicy: IfNeeded``) when a later
webhook changed the object, e.g. Volcano's pod mutator setting a resource group's scheduler.
vgate's first pass records itself in the ``vgate.io/injected`` annotation (what it set, or
``none``); a pass that finds the record only adds what is missing (a container another webhook
injected gets its QoS resources) and never replaces or removes a value, so it cannot undo another
webhook's decision. A forged record only makes vgate fill in less, never the queue (an unchosen
queue is always filled), and /validate never reads it: the rules judge the queue the workload names
or, naming none, the one the config assigns (policies/lib/workload.rego ``queue``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from jsonpointer import escape

from .admission import AdmissionRequest
from .config import Config
from .kinds import Workload
from .qos import QOS_ANNOTATION, apply_qos, kubernetes_qos, requested_qos
from .queues import QUEUE_ANNOTATION, queue_and_source
from .size_limits import oversize
from .spark import app_path
from .workloads import (
    MUTATED,
    annotations_of,
    classify,
    is_exempt,
    labels_of,
    matches_globs,
    set_annotation,
    task_templates,
)

FieldPath = tuple[str | int, ...]  # a JSON path from the object's root, before RFC 6901 escaping
_DEFAULT_SCHEDULERS = (None, "", "default-scheduler")
INJECTED_ANNOTATION = "vgate.io/injected"
_RECORDED_ANNOTATIONS = {QUEUE_ANNOTATION: "queue", QOS_ANNOTATION: "qosClass"}
# Where each kind keeps its queue; mutation changes it only when none is chosen (queues.queue_and_source).
_QUEUE_PATHS = {"/metadata/annotations/" + escape(QUEUE_ANNOTATION), "/spec/queue",
                "/spec/batchSchedulerOptions/queue", "/spec/template/batchSchedulerOptions/queue"}


@dataclass
class Mutation:
    """The patch for one request and what was decided, for the response and the audit trail."""

    patch: list[dict[str, Any]] = field(default_factory=list)
    queue: str | None = None
    queue_source: str | None = None  # where the queue came from (queues.queue_and_source)
    qos_classes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # resources vgate chose for the submitter

    @property
    def paths(self) -> list[str]:
        return [op["path"] for op in self.patch]


def mutate(request: AdmissionRequest, config: Config, namespace_queue: str | None = None,
           inherited: dict[str, str] | None = None) -> Mutation:
    """The mutation for one admission request; an empty Mutation when nothing applies.

    ``namespace_queue``: the queue the request's namespace is annotated with, from the cluster state.
    ``inherited``: labels a Spark executor takes from its driver (its sensitivity, its egress
    label, which the deny-egress NetworkPolicy selects), added to the pod.
    """
    workload = classify(request)
    if (workload not in MUTATED or request.operation != "CREATE" or request.object is None
            or is_exempt(request.namespace, config) or oversize(workload, request.object, request.kind, config)):
        return Mutation()  # an oversized object is left to /validate, which denies it with the reason
    original = request.object
    mutated = orjson.loads(orjson.dumps(original))  # a deep copy, several times faster than copy.deepcopy
    labelled = inherited if workload is Workload.POD else None
    if labelled:
        mutated.setdefault("metadata", {}).setdefault("labels", {}).update(labelled)
    result = _MUTATORS[workload](mutated, request.namespace, config, namespace_queue)
    fields = managed_fields(workload, mutated)
    if labelled:
        fields.insert(0, ("metadata", "labels"))
    if INJECTED_ANNOTATION in annotations_of(original):
        # A later pass adds only what is missing, so it never undoes another webhook; a queue that
        # names none (empty, or Volcano's "default") is missing whoever wrote the record, which a
        # submitter can forge: no webhook chooses "default" over a real queue.
        # A priorityClassName it adds brings its priority along: the Priority plugin already set the
        # integer from no class (0), and the API server refuses a class and a priority that disagree.
        patch = diff_managed(original, mutated, fields)
        adds_class = any(op["op"] == "add" and op["path"] == "/spec/priorityClassName" for op in patch)
        result.patch = [op for op in patch if op["op"] == "add" or op["path"] in _QUEUE_PATHS
                        or (adds_class and op["path"] == "/spec/priority")]
        return result
    set_annotation(mutated, INJECTED_ANNOTATION, ",".join(injected(original, mutated, fields)) or "none")
    result.patch = diff_managed(original, mutated, fields)
    return result


def injected(original: dict[str, Any], mutated: dict[str, Any], fields: list[FieldPath]) -> list[str]:
    """What mutation set, by name (queue, schedulerName, priorityClassName, priority, qosClass, resources)."""
    names: set[str] = set()
    for path in fields:
        if path[-1] == "annotations":
            before, after = (_lookup(document, path) for document in (original, mutated))
            before, after = (a if isinstance(a, dict) else {} for a in (before, after))
            names |= {name for key, name in _RECORDED_ANNOTATIONS.items() if before.get(key) != after.get(key)}
        elif _lookup(original, path) != _lookup(mutated, path):
            names.add(str(path[-1]))
    return sorted(names)


_MISSING = object()


def managed_fields(workload: Workload, obj: dict[str, Any]) -> list[FieldPath]:
    """Every field mutation may add or change, as paths from the object's root."""
    if workload is Workload.POD:
        return [("metadata", "annotations"), ("spec", "schedulerName"), ("spec", "priorityClassName"),
                ("spec", "priority"), *_resource_fields(("spec",), obj.get("spec"))]
    if workload is Workload.POD_GROUP:
        return [("metadata", "annotations"), ("spec", "queue"), ("spec", "priorityClassName")]
    if workload is Workload.SPARK_APPLICATION:
        app: FieldPath = app_path(obj.get("kind"))
        return [("metadata", "annotations"), (*app, "batchScheduler"), (*app, "batchSchedulerOptions"),
                (*app, "driver", "coreLimit"), (*app, "executor", "coreLimit")]
    fields: list[FieldPath] = [("metadata", "annotations"), ("spec", "queue"), ("spec", "schedulerName"),
                               ("spec", "priorityClassName")]
    for index, task in enumerate((obj.get("spec") or {}).get("tasks") or []):
        template = task.get("template") if isinstance(task, dict) else None
        if isinstance(template, dict):
            prefix: FieldPath = ("spec", "tasks", index, "template")
            fields += [(*prefix, "metadata", "annotations"), *_resource_fields((*prefix, "spec"), template.get("spec"))]
    return fields


def _resource_fields(prefix: FieldPath, spec: Any) -> list[FieldPath]:
    if not isinstance(spec, dict):
        return []
    return [(*prefix, kind, index, "resources")
            for kind in ("initContainers", "containers")
            for index, container in enumerate(spec.get(kind) or []) if isinstance(container, dict)]


def diff_managed(original: dict[str, Any], mutated: dict[str, Any], fields: list[FieldPath]) -> list[dict[str, Any]]:
    """The JSON Patch from ``original`` to ``mutated``, looking only at ``fields``.

    A field whose parent is missing is added whole at the first missing level (so a pod with no
    annotations gets one ``add /metadata/annotations``), once even if several fields share it.
    """
    ops: list[dict[str, Any]] = []
    added: set[FieldPath] = set()  # checked by each path's prefixes: linear in the fields, however many
    for path in fields:
        target = _lookup(mutated, path)
        if target is _MISSING or any(path[:depth] in added for depth in range(1, len(path) + 1)):
            continue
        node: Any = original
        for depth, key in enumerate(path):
            child = _lookup(node, (key,))
            if child is _MISSING:
                missing = path[:depth + 1]
                ops.append({"op": "add", "path": _pointer(missing), "value": _lookup(mutated, missing)})
                added.add(missing)
                break
            node = child
        else:
            ops += _diff(path, node, target)
    return ops


def _diff(path: FieldPath, old: Any, new: Any) -> list[dict[str, Any]]:
    """add/remove/replace operations from ``old`` to ``new`` at ``path``, key by key in objects.

    Mutation only adds keys to and changes values in small objects (annotations, resources), so
    this is all the diff it needs; jsonpatch.make_patch, a general diff with move detection, cost
    50-100 us per field even for one added key, most of /mutate. The patches are still applied
    and checked with the jsonpatch library in the tests.
    """
    if old == new:
        return []
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [{"op": "replace", "path": _pointer(path), "value": new}]
    ops = [{"op": "remove", "path": _pointer((*path, key))} for key in old if key not in new]
    for key, value in new.items():
        if key in old:
            ops += _diff((*path, key), old[key], value)
        else:
            ops.append({"op": "add", "path": _pointer((*path, key)), "value": value})
    return ops


def _lookup(document: Any, path: FieldPath) -> Any:
    for key in path:
        if isinstance(document, dict) and key in document:
            document = document[key]
        elif isinstance(document, list) and isinstance(key, int) and key < len(document):
            document = document[key]
        else:
            return _MISSING
    return document


def _pointer(path: FieldPath) -> str:
    """RFC 6901 pointer, each token escaped by jsonpointer (``~`` → ``~0``, ``/`` → ``~1``)."""
    return "".join("/" + escape(str(key)) for key in path)


def _mutate_pod(pod: dict[str, Any], namespace: str, config: Config,
               namespace_queue: str | None) -> Mutation:
    annotations = annotations_of(pod)
    queue, source = queue_and_source(config, namespace, labels_of(pod), annotations.get(QUEUE_ANNOTATION),
                                     namespace_queue)
    if annotations.get(QUEUE_ANNOTATION) != queue:
        set_annotation(pod, QUEUE_ANNOTATION, queue)
    spec = pod.setdefault("spec", {})
    if matches_globs(namespace, config.volcano["namespaces"]) and spec.get("schedulerName") in _DEFAULT_SCHEDULERS:
        spec["schedulerName"] = config.volcano["schedulerName"]
    _inject_priority(spec, queue, config, with_value=True)
    warnings: list[str] = []
    qos_class = _inject_qos(pod, annotations_of(pod), queue, config, warnings, "pod")
    return Mutation(queue=queue, queue_source=source, qos_classes=[qos_class], warnings=warnings)


def _queue_and_class(holder: dict[str, Any], labels: dict[str, str], namespace: str, config: Config,
                     namespace_queue: str | None) -> tuple[str, str]:
    """Set ``holder``'s ``queue`` (unless one is chosen) and the queue's ``priorityClassName``
    (unless one is): a Volcano Job's or PodGroup's spec, a Spark application's batchSchedulerOptions."""
    queue, source = queue_and_source(config, namespace, labels, holder.get("queue"), namespace_queue)
    holder["queue"] = queue
    _inject_priority(holder, queue, config, with_value=False)
    return queue, source


def _mutate_job(job: dict[str, Any], namespace: str, config: Config,
               namespace_queue: str | None) -> Mutation:
    spec = job.setdefault("spec", {})
    queue, source = _queue_and_class(spec, labels_of(job), namespace, config, namespace_queue)
    if matches_globs(namespace, config.volcano["namespaces"]) and not spec.get("schedulerName"):
        spec["schedulerName"] = config.volcano["schedulerName"]
    job_request = annotations_of(job)
    warnings: list[str] = []
    classes = [_inject_qos(template, {**job_request, **annotations_of(template)}, queue, config, warnings,
                           f"task[{index}]") for index, template in enumerate(task_templates(job))]
    return Mutation(queue=queue, queue_source=source, qos_classes=classes, warnings=warnings)


def _mutate_pod_group(group: dict[str, Any], namespace: str, config: Config,
                     namespace_queue: str | None) -> Mutation:
    queue, source = _queue_and_class(group.setdefault("spec", {}), labels_of(group), namespace, config,
                                     namespace_queue)
    return Mutation(queue=queue, queue_source=source)


def _mutate_spark(application: dict[str, Any], namespace: str, config: Config,
                  namespace_queue: str | None) -> Mutation:
    """A Spark application runs on Volcano in its queue: the operator's batchScheduler and
    batchSchedulerOptions (queue, priority class) are filled in where missing; in a Guaranteed
    queue each role without a CPU limit gets its cores as one (Spark sizes memory request and limit
    alike already, as memory plus overhead)."""
    app = application
    for key in app_path(application.get("kind")):
        app = app.setdefault(key, {})
    queue, source = _queue_and_class(app.setdefault("batchSchedulerOptions", {}), labels_of(application), namespace,
                                     config, namespace_queue)
    if matches_globs(namespace, config.volcano["namespaces"]) and not app.get("batchScheduler"):
        app["batchScheduler"] = config.volcano["schedulerName"]
    definition = config.queue(queue)
    qos_class = requested_qos(annotations_of(application), config) or (definition.qos_class if definition else None)
    warnings = []
    for role_name in ("driver", "executor"):
        role = app.get(role_name)
        if qos_class == "Guaranteed" and isinstance(role, dict) and not role.get("coreLimit"):
            role["coreLimit"] = str(role.get("coreRequest") or role.get("cores") or 1)
            warnings.append(f"spec.{role_name} set no coreLimit: queue {queue} (Guaranteed) gave it "
                            f"{role['coreLimit']}, its cores; set coreLimit to choose")
    return Mutation(queue=queue, queue_source=source, qos_classes=[qos_class or "as Spark sizes it"], warnings=warnings)


# How each kind kinds.KINDS marks as mutated is mutated; a kind it does not mark is never patched.
_MUTATORS = {Workload.POD: _mutate_pod, Workload.VOLCANO_JOB: _mutate_job, Workload.POD_GROUP: _mutate_pod_group,
             Workload.SPARK_APPLICATION: _mutate_spark}


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


def _inject_qos(holder: dict[str, Any], annotations: dict[str, str], queue: str, config: Config,
                warnings: list[str], where: str) -> str:
    """Decide the QoS class of a pod (or pod template), fill in resources, record the class; a
    warning for each container given the queue's default resources."""
    spec = holder.setdefault("spec", {})
    definition = config.queue(queue)
    qos_class = (requested_qos(annotations, config)
                 or (definition.qos_class if definition else None)
                 or kubernetes_qos(spec))
    for container, given in apply_qos(spec, qos_class, config).items():
        chosen = ", ".join(f"{name} {quantity}" for name, quantity in sorted(given.items()))
        warnings.append(f"{where} container {container} set no {'/'.join(sorted(given))}: queue {queue} ({qos_class}) "
                        f"gave it {chosen}; set resources to choose")
    if annotations_of(holder).get(QOS_ANNOTATION) != qos_class:
        set_annotation(holder, QOS_ANNOTATION, qos_class)
    return qos_class
