"""Every admission kind vgate handles, in one table: adding a kind is one entry here (and the chart's rule).

Each entry says what the kind is (group, version, kind and the resource the webhooks register),
how rules and metrics name it (``workload``), what vgate does with it (``handler``: its pod specs,
what the engine evaluates, its mutator if ``/mutate`` patches it, the cluster context it needs and
what its record adds: ``handlers``) and which fields an UPDATE may still change that rules judge
(``update_mutable``, from Kubernetes' and Volcano's update validation). Pod subresources whose
writes rules judge are listed apart. The chart's webhook rules, the deploy invariants and the
write-path table of docs/operators.md are held to this table by tests (tests/unit/core/test_kinds.py),
so a kind added here and not registered there fails a test instead of going unjudged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any

from . import handlers
from .admission import AdmissionRequest
from .config import Config
from .kind_handler import ClusterView, KindContext, KindHandler
from .pod_templates import template_at


class Workload(str, Enum):
    POD = "Pod"
    VOLCANO_JOB = "Job.batch.volcano.sh"
    POD_GROUP = "PodGroup.scheduling.volcano.sh"
    POD_CONTROLLER = "pod controller"
    EPHEMERAL_CONTAINERS = "pods/ephemeralcontainers"
    RESIZE = "pods/resize"
    BINDING = "Binding"
    SPARK_APPLICATION = "SparkApplication"
    NODE = "Node"
    NETWORK_POLICY = "NetworkPolicy"
    ADMIN_NETWORK_POLICY = "AdminNetworkPolicy"
    BASELINE_ADMIN_NETWORK_POLICY = "BaselineAdminNetworkPolicy"
    NAMESPACE = "Namespace"
    SERVICE = "Service"
    INGRESS = "Ingress"


@dataclass(frozen=True)
class AdmissionKind:
    group: str
    version: str
    kind: str
    resource: str               # the plural the webhook rules name
    workload: Workload
    handler: KindHandler        # what vgate does with it (core/handlers.py)
    update_mutable: tuple[str, ...] = ()  # what an UPDATE may change that rules judge (docs/operators.md, write paths)
    operations: tuple[str, ...] = ("CREATE", "UPDATE")  # what the validating webhook is sent
    subresource: str = ""       # also written as this subresource of another resource ("pods/binding")
    webhook: str = "validate.vgate.io"  # the validating webhook of the chart that is sent it

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.kind)

    @property
    def mutated(self) -> bool:
        """/mutate patches it (on CREATE); without a mutator it is only judged."""
        return self.handler.mutator is not None


def _controller(group: str, kind: str, resource: str, *template: str) -> AdmissionKind:
    return AdmissionKind(group, "v1", kind, resource, Workload.POD_CONTROLLER,
                         handlers.pod_controller(template_at(*(template or ("spec", "template")))),
                         update_mutable=("the pod template",))


KINDS: tuple[AdmissionKind, ...] = (
    AdmissionKind("", "v1", "Pod", "pods", Workload.POD, handlers.POD,
                  update_mutable=("image", "tolerations", "scheduling.volcano.sh/queue-name",
                                  "vgate.io/data-classification")),
    AdmissionKind("batch.volcano.sh", "v1alpha1", "Job", "jobs", Workload.VOLCANO_JOB, handlers.VOLCANO_JOB,
                  update_mutable=("spec.queue",)),
    AdmissionKind("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups", Workload.POD_GROUP, handlers.POD_GROUP,
                  update_mutable=("spec.queue",)),
    _controller("apps", "Deployment", "deployments"),
    _controller("apps", "StatefulSet", "statefulsets"),
    _controller("apps", "DaemonSet", "daemonsets"),
    _controller("apps", "ReplicaSet", "replicasets"),
    _controller("", "ReplicationController", "replicationcontrollers"),
    _controller("batch", "Job", "jobs"),
    _controller("batch", "CronJob", "cronjobs", "spec", "jobTemplate", "spec", "template"),
    # The Spark operator's applications: mutated (queue, scheduler, priority class, CPU limit) and judged
    # as the driver and executor pods they will create (core/spark.py). The operator runs an application
    # again when its spec changes: an UPDATE of the spec is judged as a CREATE is.
    AdmissionKind("sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications",
                  Workload.SPARK_APPLICATION, handlers.spark_application("SparkApplication"),
                  update_mutable=("spec.driver",)),
    AdmissionKind("sparkoperator.k8s.io", "v1beta2", "ScheduledSparkApplication", "scheduledsparkapplications",
                  Workload.SPARK_APPLICATION, handlers.spark_application("ScheduledSparkApplication"),
                  update_mutable=("spec.template",)),
    # Where the scheduler puts a pod: judged against the node it names and the cluster state (the
    # binding webhook, registered apart: its failure policy is its own). The legacy `bindings`
    # resource binds as pods/binding does: both are registered, or one would be a way around the other.
    AdmissionKind("", "v1", "Binding", "bindings", Workload.BINDING, handlers.BINDING, operations=("CREATE",),
                  subresource="pods/binding", webhook="bind.vgate.io"),
    # A node's placement facts (its zone and memory-encryption labels, its tenant taint) changed: a
    # node's own identity may not (kubelets may set the zone label on their Node); an admin's change is
    # recorded. Its own webhook, whose matchConditions send only writes that change those facts.
    AdmissionKind("", "v1", "Node", "nodes", Workload.NODE, handlers.NODE, operations=("UPDATE",),
                  webhook="nodes.vgate.io"),
    # What a sensitive pod can reach, and what can reach it from outside (core/egress_judge.py): a
    # NetworkPolicy created, changed or deleted, a Namespace's labels (namespaceSelectors), a Service
    # or an Ingress exposing pods. Their own webhook, whose matchConditions send only such writes.
    AdmissionKind("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", Workload.NETWORK_POLICY,
                  handlers.NETWORK, operations=("CREATE", "UPDATE", "DELETE"),
                  webhook="network.vgate.io"),
    # sig-network's admin tiers (network-policy-api v1alpha1 CRDs, where installed): an admin's Allow
    # or Pass can open what every NetworkPolicy closes, a deleted Deny can too.
    AdmissionKind("policy.networking.k8s.io", "v1alpha1", "AdminNetworkPolicy", "adminnetworkpolicies",
                  Workload.ADMIN_NETWORK_POLICY, handlers.NETWORK, operations=("CREATE", "UPDATE", "DELETE"),
                  webhook="network.vgate.io"),
    AdmissionKind("policy.networking.k8s.io", "v1alpha1", "BaselineAdminNetworkPolicy",
                  "baselineadminnetworkpolicies", Workload.BASELINE_ADMIN_NETWORK_POLICY, handlers.NETWORK,
                  operations=("CREATE", "UPDATE", "DELETE"), webhook="network.vgate.io"),
    AdmissionKind("", "v1", "Namespace", "namespaces", Workload.NAMESPACE, handlers.NETWORK, operations=("UPDATE",),
                  webhook="network.vgate.io"),
    AdmissionKind("", "v1", "Service", "services", Workload.SERVICE, handlers.NETWORK, webhook="network.vgate.io"),
    AdmissionKind("networking.k8s.io", "v1", "Ingress", "ingresses", Workload.INGRESS, handlers.NETWORK,
                  webhook="network.vgate.io"),
)


@dataclass(frozen=True)
class PodSubresource:
    """A pod subresource whose writes (UPDATE only) change what rules judge."""

    workload: Workload
    judged_field: str  # what the write changes, as the write-path table names it
    handler: KindHandler = handlers.POD_SUBRESOURCE


# kubectl debug's added containers, and an in-place resize's new requests and limits (judged by the
# resource rules).
POD_SUBRESOURCES: dict[str, PodSubresource] = {
    "ephemeralcontainers": PodSubresource(Workload.EPHEMERAL_CONTAINERS, "ephemeralContainers"),
    "resize": PodSubresource(Workload.RESIZE, "resources"),
}

BY_KEY: dict[tuple[str, str, str], AdmissionKind] = {kind.key: kind for kind in KINDS}
HANDLED_KINDS = tuple(BY_KEY)  # (group, version, kind) of everything vgate judges


def entry_of(request: AdmissionRequest) -> AdmissionKind | PodSubresource | None:
    """The registry entry a request is judged by, or None for what vgate leaves alone."""
    kind = BY_KEY.get((request.group, request.version, request.kind))
    if kind is None:
        return None
    if request.sub_resource:
        if kind.subresource:  # a Binding written as pods/binding
            return kind if kind.subresource == f"{request.resource}/{request.sub_resource}" else None
        return POD_SUBRESOURCES.get(request.sub_resource) if kind.workload is Workload.POD else None
    return kind


def context_of(request: AdmissionRequest, view: ClusterView, config: Config) -> KindContext:
    """What the request's kind reads of the cluster (its handler's ``context``): the one computation
    the server (its watched state) and ``vgate eval`` (its model) both make."""
    entry = entry_of(request)
    if entry is None:
        return KindContext()
    return dataclasses.replace(entry.handler.context(request, view, config), network=view.network())


def classify(request: AdmissionRequest) -> Workload | None:
    """The workload kind of a request, or None for what vgate leaves alone."""
    entry = entry_of(request)
    return entry.workload if entry is not None else None


def template_of(obj: dict[str, Any] | None, group: str, kind: str) -> dict[str, Any] | None:
    """The pod template of a controller object of ``group``'s ``kind``, where its entry says it is."""
    for entry in KINDS:
        if (entry.group, entry.kind) == (group, kind) and entry.handler.template is not None:
            return entry.handler.template(obj)
    return None
