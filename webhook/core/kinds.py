"""Every admission kind vgate handles, in one table: adding a kind is one entry here (and its tests).

Each entry says what the kind is (group, version, kind and the resource the webhooks register),
what vgate does with it (``workload``: how rules see it; ``mutated``: whether ``/mutate`` patches
it, False unless said), where its pod specs are (``pod_specs``) and which fields an UPDATE may
still change that rules judge (``update_mutable``, from Kubernetes' and Volcano's update
validation). Pod subresources whose writes rules judge are listed apart. The chart's webhook rules
and the write-path table of docs/operators.md are held to this table by tests (tests/unit/core/test_kinds.py), so a
kind added here and not registered there fails a test instead of going unjudged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Workload(str, Enum):
    POD = "Pod"
    VOLCANO_JOB = "Job.batch.volcano.sh"
    POD_GROUP = "PodGroup.scheduling.volcano.sh"
    POD_CONTROLLER = "pod controller"
    EPHEMERAL_CONTAINERS = "pods/ephemeralcontainers"
    RESIZE = "pods/resize"
    BINDING = "Binding"
    SPARK_APPLICATION = "SparkApplication"


@dataclass(frozen=True)
class AdmissionKind:
    group: str
    version: str
    kind: str
    resource: str               # the plural the webhook rules name
    workload: Workload
    mutated: bool = False       # /mutate patches it (on CREATE); the default: it is only judged
    pod_specs: str = "none"     # "self" (the object is a pod), "tasks" (one template per task),
    #                             "template" (spec.template), "jobTemplate" (spec.jobTemplate.spec.template),
    #                             "spark" (spec.driver, spec.executor: core/spark.py),
    #                             "spark-template" (spec.template's driver and executor)
    update_mutable: tuple[str, ...] = ()  # what an UPDATE may change that rules judge (docs/operators.md, write paths)
    operations: tuple[str, ...] = ("CREATE", "UPDATE")  # what the validating webhook is sent
    subresource: str = ""       # also written as this subresource of another resource ("pods/binding")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.kind)


def _controller(group: str, kind: str, resource: str, pod_specs: str = "template") -> AdmissionKind:
    return AdmissionKind(group, "v1", kind, resource, Workload.POD_CONTROLLER, pod_specs=pod_specs,
                         update_mutable=("the pod template",))


KINDS: tuple[AdmissionKind, ...] = (
    AdmissionKind("", "v1", "Pod", "pods", Workload.POD, mutated=True, pod_specs="self",
                  update_mutable=("image", "tolerations", "scheduling.volcano.sh/queue-name")),
    AdmissionKind("batch.volcano.sh", "v1alpha1", "Job", "jobs", Workload.VOLCANO_JOB, mutated=True, pod_specs="tasks",
                  update_mutable=("spec.queue",)),
    AdmissionKind("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups", Workload.POD_GROUP, mutated=True,
                  update_mutable=("spec.queue",)),
    _controller("apps", "Deployment", "deployments"),
    _controller("apps", "StatefulSet", "statefulsets"),
    _controller("apps", "DaemonSet", "daemonsets"),
    _controller("apps", "ReplicaSet", "replicasets"),
    _controller("", "ReplicationController", "replicationcontrollers"),
    _controller("batch", "Job", "jobs"),
    _controller("batch", "CronJob", "cronjobs", pod_specs="jobTemplate"),
    # The Spark operator's applications: mutated (queue, scheduler, priority class, CPU limit) and judged
    # as the driver and executor pods they will create (core/spark.py). The operator runs an application
    # again when its spec changes: an UPDATE of the spec is judged as a CREATE is.
    AdmissionKind("sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications",
                  Workload.SPARK_APPLICATION, mutated=True, pod_specs="spark", update_mutable=("spec.driver",)),
    AdmissionKind("sparkoperator.k8s.io", "v1beta2", "ScheduledSparkApplication", "scheduledsparkapplications",
                  Workload.SPARK_APPLICATION, mutated=True, pod_specs="spark-template",
                  update_mutable=("spec.template",)),
    # Where the scheduler puts a pod: judged against the node it names and the cluster state (the
    # binding webhook, registered apart: its failure policy is its own). The legacy `bindings`
    # resource binds as pods/binding does: both are registered, or one would be a way around the other.
    AdmissionKind("", "v1", "Binding", "bindings", Workload.BINDING, operations=("CREATE",),
                  subresource="pods/binding"),
)

# The pod subresources whose writes change what rules judge (UPDATE only): kubectl debug's added
# containers, and an in-place resize's new requests and limits (judged by the resource rules).
POD_SUBRESOURCES: dict[str, tuple[Workload, str]] = {
    "ephemeralcontainers": (Workload.EPHEMERAL_CONTAINERS, "ephemeralContainers"),
    "resize": (Workload.RESIZE, "resources"),
}

BY_KEY: dict[tuple[str, str, str], AdmissionKind] = {kind.key: kind for kind in KINDS}
