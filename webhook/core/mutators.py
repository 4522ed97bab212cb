"""What /mutate changes in each kind it patches: the Volcano queue, scheduler, priority class and QoS.

Each kind's ``Mutator`` (``patching``) is its change, made on a copy, and the fields it manages,
which are all the patch is taken over; its registry entry's handler names it (``handlers``). Every
change only fills in what is missing, so mutation is idempotent and a complying object yields no patch.
"""

from __future__ import annotations

from typing import Any

from .config import Config
from .patching import FieldPath, Mutation, Mutator
from .qos import QOS_ANNOTATION, apply_qos, kubernetes_qos, requested_qos
from .queues import QUEUE_ANNOTATION, queue_and_source
from .spark import app_path, role_labels
from .workloads import annotations_of, labels_of, matches_globs, set_annotation, task_templates

_DEFAULT_SCHEDULERS = (None, "", "default-scheduler")


def _pod_fields(pod: dict[str, Any]) -> list[FieldPath]:
    return [("metadata", "annotations"), ("spec", "schedulerName"), ("spec", "priorityClassName"),
            ("spec", "priority"), *_resource_fields(("spec",), pod.get("spec"))]


def _job_fields(job: dict[str, Any]) -> list[FieldPath]:
    fields: list[FieldPath] = [("metadata", "annotations"), ("spec", "queue"), ("spec", "schedulerName"),
                               ("spec", "priorityClassName")]
    for index, task in enumerate((job.get("spec") or {}).get("tasks") or []):
        template = task.get("template") if isinstance(task, dict) else None
        if isinstance(template, dict):
            prefix: FieldPath = ("spec", "tasks", index, "template")
            fields += [(*prefix, "metadata", "annotations"), (*prefix, "metadata", "labels"),
                       *_resource_fields((*prefix, "spec"), template.get("spec"))]
    return fields


def _pod_group_fields(group: dict[str, Any]) -> list[FieldPath]:
    return [("metadata", "annotations"), ("spec", "queue"), ("spec", "priorityClassName")]


def _spark_fields(application: dict[str, Any]) -> list[FieldPath]:
    app: FieldPath = app_path(application.get("kind"))
    return [("metadata", "annotations"), (*app, "batchScheduler"), (*app, "batchSchedulerOptions"),
            (*app, "driver", "coreLimit"), (*app, "executor", "coreLimit"), (*app, "driver", "labels"),
            (*app, "executor", "labels")]


def _resource_fields(prefix: FieldPath, spec: Any) -> list[FieldPath]:
    if not isinstance(spec, dict):
        return []
    return [(*prefix, kind, index, "resources")
            for kind in ("initContainers", "containers")
            for index, container in enumerate(spec.get(kind) or []) if isinstance(container, dict)]



def _mutate_pod(pod: dict[str, Any], namespace: str, config: Config,
               namespace_queue: str | None) -> Mutation:
    annotations = annotations_of(pod)
    queue, source = queue_and_source(config, namespace, labels_of(pod), annotations.get(QUEUE_ANNOTATION),
                                     namespace_queue)
    if annotations.get(QUEUE_ANNOTATION) != queue:
        set_annotation(pod, QUEUE_ANNOTATION, queue)
    spec = pod.setdefault("spec", {})
    if matches_globs(namespace, config.volcano.namespaces) and spec.get("schedulerName") in _DEFAULT_SCHEDULERS:
        spec["schedulerName"] = config.volcano.scheduler_name
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
    if matches_globs(namespace, config.volcano.namespaces) and not spec.get("schedulerName"):
        spec["schedulerName"] = config.volcano.scheduler_name
    job_request = annotations_of(job)
    warnings: list[str] = []
    classes = [_inject_qos(template, {**job_request, **annotations_of(template)}, queue, config, warnings,
                           f"task[{index}]") for index, template in enumerate(task_templates(job))]
    _classify_tasks(job, config)
    return Mutation(queue=queue, queue_source=source, qos_classes=classes, warnings=warnings)


def _classify_tasks(job: dict[str, Any], config: Config) -> None:
    """A Job labelled sensitive (or deny-egress) in its own metadata gives each task's pods the label
    they lack, so its pods are sensitive to bindings, the NetworkPolicy and the report alike (a
    task's own contrary label is left for /validate to refuse)."""
    classification = {key: value for key, value in config.placement.classification.items()
                      if labels_of(job).get(key) == value}
    if not classification:
        return
    for template in task_templates(job):
        metadata = template.setdefault("metadata", {})
        if not isinstance(metadata.get("labels"), dict):
            metadata["labels"] = {}
        for key, value in classification.items():
            metadata["labels"].setdefault(key, value)


def _classify_roles(app: dict[str, Any], application: dict[str, Any], config: Config) -> None:
    """A Spark application is one unit: a classification label any role (or the application's own
    metadata) carries goes to each role's ``labels`` that lacks it, so the driver and executor pods the
    operator and the driver create carry it (a role's contrary label is left for /validate to refuse)."""
    roles = {name: role for name in ("driver", "executor") if isinstance(role := app.get(name), dict)}
    said = [labels_of(application), *(role_labels(app, name) for name in roles)]
    classification = {key: value for key, value in config.placement.classification.items()
                      if any(labels.get(key) == value for labels in said)}
    for name, role in roles.items():
        if classification and not isinstance(role.get("labels"), dict):
            role["labels"] = {}
        own = role_labels(app, name)  # sparkConf's too: a contrary one there is refused, not overridden
        for key, value in classification.items():
            if key not in own:
                role["labels"][key] = value


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
    if matches_globs(namespace, config.volcano.namespaces) and not app.get("batchScheduler"):
        app["batchScheduler"] = config.volcano.scheduler_name
    definition = config.queue(queue)
    qos_class = requested_qos(annotations_of(application), config) or (definition.qos_class if definition else None)
    _classify_roles(app, application, config)
    warnings = []
    for role_name in ("driver", "executor"):
        role = app.get(role_name)
        if qos_class == "Guaranteed" and isinstance(role, dict) and not role.get("coreLimit"):
            role["coreLimit"] = str(role.get("coreRequest") or role.get("cores") or 1)
            warnings.append(f"spec.{role_name} set no coreLimit: queue {queue} (Guaranteed) gave it "
                            f"{role['coreLimit']}, its cores; set coreLimit to choose")
    return Mutation(queue=queue, queue_source=source, qos_classes=[qos_class or "as Spark sizes it"], warnings=warnings)


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


POD = Mutator(_mutate_pod, _pod_fields)
VOLCANO_JOB = Mutator(_mutate_job, _job_fields)
POD_GROUP = Mutator(_mutate_pod_group, _pod_group_fields)
SPARK_APPLICATION = Mutator(_mutate_spark, _spark_fields)
