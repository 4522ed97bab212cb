"""Each admission kind's handler: what it is judged as, where its pods are, what it needs and records.

``kinds.KINDS`` gives every entry one of these; nothing outside this module and the modules it
assembles from (``pod_templates``, ``spark``, ``bindings``, ``mutators``) knows one kind from another.

- A **Pod** is judged as sent, with the classification labels a Spark executor takes from its
  driver (every owner pod, found through the cluster view) as its own. Its own label that would
  weaken the driver's (``public`` where the driver is ``sensitive``, egress ``allow`` where it is
  ``deny``) is refused, not overridden; an owner the view does not hold yet is answered per
  server.failureMode, never judged as ordinary.
- A **Volcano Job** is judged as sent; its pod specs are its tasks' templates, and it may have at
  most ``server.maxTasksPerJob`` tasks.
- A **PodGroup** is judged as sent; it has no pods.
- A **pod controller** is judged as the pod its template makes (``pod_templates``).
- A **Spark application** is judged as its driver and executor pods (``spark.spark_pods``), each
  as /mutate will deliver it; it may run at most ``server.maxTasksPerJob`` executors.
- A **Binding** is judged against its pod, node and PodGroup from the cluster view (``bindings``),
  and its placement recorded.
- The pod subresources (``pods/ephemeralcontainers``, ``pods/resize``) are judged as sent.
- A **Node** UPDATE is judged as sent: who changes its zone, encryption labels or tenant taint.
- A **NetworkPolicy**, a **Namespace**'s labels, a **Service** or an **Ingress** is judged as sent,
  with what it does to sensitive pods' effective egress and exposure (``egress_judge``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from . import mutators
from .admission import AdmissionRequest
from .bindings import GROUP_ANNOTATION, VOLCANO_MADE_GROUP, binding_context, bound, judged_binding, record_binding
from .config import Config
from .contract import EngineInput
from .drift import record_node_drift
from .errors import EvaluationError, SparkSpecError
from .kind_handler import (
    ClusterView,
    Judged,
    KindContext,
    KindHandler,
    PodSpecs,
    as_submitted,
    namespace_context,
)
from .pod_templates import Template, as_delivered, changes_template, judged_as_pod, template_pod_specs
from .spark import (
    app_spec,
    contradicting,
    executor_instances,
    owner_pods,
    owners_classification,
    role_pod_specs,
    spark_defaults,
    spark_pods,
    unjudged_conf,
    with_defaults,
)
from .workloads import annotations_of, labels_of, task_templates

UNIT_OWNERS = {"Job", "SparkApplication", "ScheduledSparkApplication"}  # PodGroups pinned through their owner


def _own_spec(obj: Mapping[str, Any]) -> PodSpecs:
    return [("its spec", obj.get("spec"))]


def _no_pods(obj: Mapping[str, Any]) -> PodSpecs:
    return []


def _pod_context(request: AdmissionRequest, view: ClusterView, config: Config) -> KindContext:
    """Its namespace's queue and, for a pod owned by pods (a Spark executor and its driver), their
    classification labels (the sensitive label, the egress label): those it lacks, to inherit, and
    those it contradicts; or the owner the view does not hold."""
    context = namespace_context(request, view, config)
    pod = request.object
    if pod is None or request.operation != "CREATE":
        return context
    names = owner_pods(pod)
    if not names:  # most pods: nothing to inherit
        return _group_zone(context, pod, labels_of(pod), request.namespace, view, config)
    owners, zones = [], {}
    zone_label = config.placement.zone_label
    for name in names:
        found = view.pod(request.namespace, name)
        if found is None:
            return dataclasses.replace(context, unknown_owner=name)
        owners.append(labels_of(found))
        zones[name] = ((found.get("spec") or {}).get("nodeSelector") or {}).get(zone_label)
    restricting = config.placement.classification
    theirs = owners_classification(owners, restricting)
    own = labels_of(pod)
    contrary = [f"{key}={own[key]} where its owner pod carries {key}={theirs[key]}"
                for key in contradicting(own, theirs, restricting)]
    # a sensitive job is one zone: an executor pinned elsewhere than its driver (both pins are immutable
    # once the pods exist, so no interleaving of creates or bindings can split them)
    own_zone = ((pod.get("spec") or {}).get("nodeSelector") or {}).get(zone_label)
    if config.placement.is_sensitive({**own, **theirs}):
        contrary += [f"{zone_label}={own_zone or '(none)'} where its owner pod {name} is pinned to {zone_label}={zone}"
                     for name, zone in zones.items() if zone and own_zone != zone]
    inherited = {key: value for key, value in theirs.items() if key not in own}
    context = dataclasses.replace(context, inherited=inherited or None, contrary=tuple(contrary))
    return _group_zone(context, pod, {**own, **theirs}, request.namespace, view, config)


def _group_zone(context: KindContext, pod: Mapping[str, Any], labels: Mapping[str, str], namespace: str,
                view: ClusterView, config: Config) -> KindContext:
    """A sensitive pod in a PodGroup of its users' making is pinned to the zone its PodGroup fixes (the
    zone label on the PodGroup, set at its creation and never changed: placement-classification-fixed),
    so members created or bound at the same moment, by any worker or replica, cannot split the gang
    across zones. A Volcano Job's or a Spark application's PodGroup is pinned through its owner (every
    task, every role in one zone, judged at its admission); a bare pod's own (podgroup-<uid>) has one
    member. The PodGroup the view does not hold yet is answered per server.failureMode; without
    cluster.watch, nothing is read (the chart registers no binding webhook then either)."""
    group = annotations_of(pod).get(GROUP_ANNOTATION)
    if not group or group.startswith(VOLCANO_MADE_GROUP) or not config.placement.is_sensitive(labels) \
            or not view.holds_cluster():  # without cluster.watch no binding is judged either (no webhook)
        return context
    found = view.pod_group(namespace, group)
    if found is None:
        return dataclasses.replace(context, unknown_group=group)
    owners = {str(owner.get("kind")) for owner in (found.get("metadata") or {}).get("ownerReferences") or []}
    if owners & UNIT_OWNERS:
        return context
    zone_label = config.placement.zone_label
    fixed = labels_of(found).get(zone_label)
    own_zone = ((pod.get("spec") or {}).get("nodeSelector") or {}).get(zone_label)
    if fixed is None:
        reason = (f"its PodGroup {group} fixes no zone: label the PodGroup {zone_label}=<zone> when creating it, "
                  "and pin its members there")
    elif own_zone != fixed:
        reason = f"{zone_label}={own_zone or '(none)'} where its PodGroup {group} is fixed to {zone_label}={fixed}"
    else:
        return context
    return dataclasses.replace(context, contrary=(*context.contrary, reason))


def _judged_pod(request: AdmissionRequest, config: Config, context: KindContext) -> list[Judged]:
    """The pod as sent, carrying the labels it inherits; EvaluationError when an owner is not known
    yet, SparkSpecError when its own labels contradict its owner's classification."""
    if context.unknown_owner:
        raise EvaluationError(f"cannot judge this pod yet: its owner pod {request.namespace}/"
                              f"{context.unknown_owner} is not in vgate's cluster state (created moments ago, "
                              "or cluster.watch is off), and a pod is judged with its owner's classification")
    if context.unknown_group:
        raise EvaluationError(f"cannot judge this pod yet: its PodGroup {request.namespace}/{context.unknown_group} "
                              "is not in vgate's cluster state (create the PodGroup first; or cluster.watch is off), "
                              "and a sensitive member is pinned to the zone its PodGroup fixes")
    if context.contrary:
        raise SparkSpecError("a pod has the classification and zone of its unit (a Spark executor its driver's, a "
                             f"member its PodGroup's): it carries {'; '.join(context.contrary)}")
    if not context.inherited:
        return as_submitted(request, config, context)
    review = orjson.loads(request.raw)
    review["request"]["object"].setdefault("metadata", {}).setdefault("labels", {}).update(context.inherited)
    return [Judged("", review["request"]["object"], EngineInput.of(review))]


def _record_inherited(request: AdmissionRequest, context: KindContext, config: Config) -> dict[str, Any]:
    return {"inherited": dict(context.inherited)} if context.inherited else {}


def _task_specs(job: Mapping[str, Any]) -> PodSpecs:
    return [(f"spec.tasks[{index}]", template.get("spec")) for index, template in enumerate(task_templates(job))]


def _task_count(job: Mapping[str, Any], config: Config) -> str | None:
    tasks = (job.get("spec") or {}).get("tasks")
    count, most = len(tasks) if isinstance(tasks, list) else 0, config.server.max_tasks_per_job
    return f"it has {count} tasks; the gateway judges at most {most} (server.maxTasksPerJob)" if count > most else None


def _spark_pod_specs(kind: str) -> Callable[[Mapping[str, Any]], PodSpecs]:
    def pod_specs(obj: Mapping[str, Any]) -> PodSpecs:
        return list(role_pod_specs(obj, kind))
    return pod_specs


def _judged_spark(request: AdmissionRequest, config: Config, context: KindContext) -> list[Judged]:
    """The driver and executor pods, each as /mutate will deliver it, as one unit: each carries the
    application's classification (a role's own contrary label is a SparkSpecError, as an executor's
    is against its driver), and a sensitive application's roles pin one zone. SparkSpecError when
    its pods cannot be told, or it may run more executors than the gateway judges."""
    obj = request.object or request.old_object or {}
    executors, most = executor_instances(obj, request.kind), config.server.max_tasks_per_job
    if executors > most:
        raise SparkSpecError(f"it may run {executors} executors; the gateway judges at most {most} "
                             "(server.maxTasksPerJob)")
    if context.spark_defaults is not None and not isinstance(context.spark_defaults, Mapping):
        raise SparkSpecError(context.spark_defaults)  # its sparkConfigMap could not be read
    pods = spark_pods(with_defaults(obj, request.kind, context.spark_defaults) if context.spark_defaults else obj,
                      request.kind)
    _as_one_unit(pods, labels_of(obj), config)
    return [Judged(f"{request.kind} {request.qualified_name} {where}: ",
                   *as_delivered(request, pod, config, context.namespace_queue))
            for where, pod in pods]


def _as_one_unit(pods: list[tuple[str, dict[str, Any]]], own: dict[str, str], config: Config) -> None:
    """A Spark job is one placement unit: the driver's and executors' classification is the job's
    (its own metadata's or any role's; a role lacking it gets it, one saying otherwise is refused), and
    a sensitive job's roles are pinned to the same zone."""
    restricting = config.placement.classification
    unit = owners_classification([own, *(labels_of(pod) for _, pod in pods)], restricting)
    for where, pod in pods:
        labels = pod["metadata"]["labels"]
        contrary = [f"{key}={labels[key]}" for key in contradicting(labels, unit, restricting)]
        if contrary:
            raise SparkSpecError(f"a Spark application is one unit: {where} carries {', '.join(contrary)} where "
                                 f"another role carries {', '.join(f'{k}={v}' for k, v in unit.items())}")
        labels.update({key: value for key, value in unit.items() if key not in labels})
    if config.placement.is_sensitive(unit):
        zones = {where: (pod["spec"].get("nodeSelector") or {}).get(config.placement.zone_label) for where, pod in pods}
        if len(set(zones.values())) > 1:
            pinned = ", ".join(f"{where} to {zone or 'no zone'}" for where, zone in zones.items())
            raise SparkSpecError(f"a sensitive Spark application runs in one zone: {pinned}")


def _spark_context(request: AdmissionRequest, view: ClusterView, config: Config) -> KindContext:
    """Its namespace's queue and, when it names a sparkConfigMap, that ConfigMap's spark-defaults.conf
    (read once with a GET: vgate watches no ConfigMaps), or why it cannot be read."""
    context = namespace_context(request, view, config)
    name = app_spec(request.object, request.kind).get("sparkConfigMap")
    if not name:
        return context
    if not view.holds_cluster():
        reason = f"sparkConfigMap {name} is read from the cluster, and cluster.watch is off"
        return dataclasses.replace(context, spark_defaults=reason)
    found = view.config_map(request.namespace, str(name))
    if found is None:
        reason = (f"sparkConfigMap {name} does not exist in {request.namespace} (or vgate cannot read it): the "
                  "operator would run without its settings")
        return dataclasses.replace(context, spark_defaults=reason)
    text = (found.get("data") or {}).get("spark-defaults.conf") or ""
    return dataclasses.replace(context, spark_defaults=spark_defaults(str(text)))


def _spark_spec_changed(request: AdmissionRequest) -> bool:
    """CREATE, or an UPDATE of the spec: the operator runs the application again."""
    return request.operation != "UPDATE" or (request.object or {}).get("spec") != (request.old_object or {}).get("spec")


POD = KindHandler(_own_spec, _judged_pod, context=_pod_context, mutator=mutators.POD, record=_record_inherited,
                  judges_pods=True)
VOLCANO_JOB = KindHandler(_task_specs, as_submitted, mutator=mutators.VOLCANO_JOB, limits=_task_count,
                          judges_pods=True)
POD_GROUP = KindHandler(_no_pods, as_submitted, mutator=mutators.POD_GROUP)
POD_SUBRESOURCE = KindHandler(_own_spec, as_submitted)  # pods/ephemeralcontainers, pods/resize: judged as sent
BINDING = KindHandler(_no_pods, judged_binding, context=binding_context, record=record_binding, admitted=bound,
                      judges_pods=True)  # its pod, as the cluster state holds it
NODE = KindHandler(_no_pods, as_submitted, record=record_node_drift)  # a node's labels and taints, as changed
NETWORK = KindHandler(_no_pods, as_submitted)  # judged with what it does to sensitive pods' egress (input.egress)


def pod_controller(template: Template) -> KindHandler:
    """A controller keeping its pod template where ``template`` finds it."""
    return KindHandler(template_pod_specs(template), judged_as_pod(template), new_pods=changes_template(template),
                       template=template, judges_pods=True)


def spark_application(kind: str) -> KindHandler:
    """A SparkApplication, or a ScheduledSparkApplication (its application in ``spec.template``)."""
    return KindHandler(_spark_pod_specs(kind), _judged_spark, context=_spark_context,
                       mutator=mutators.SPARK_APPLICATION, new_pods=_spark_spec_changed, judges_pods=True,
                       warnings=lambda request: unjudged_conf(request.object or {}, kind))
