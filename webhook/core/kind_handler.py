"""What a kind does, as the functions every judged path calls: the behaviour half of a registry entry.

pod-security-admission keeps behaviour beside its registry (``PodSpecExtractor``, ``Check.CheckPod``);
vgate does the same. Each entry of ``kinds.KINDS`` carries a KindHandler, and mutation, validation,
the size limits, the gateway and ``vgate eval`` call what it gives instead of branching on the kind.
What every judged path reads (the pod specs, what the engine evaluates) has no default: a kind
cannot be added without saying it, so none falls through to another kind's behaviour. The rest
defaults to "nothing": no mutation, no limit beyond the pod specs', nothing added to the record.

The cluster context a kind needs is computed once per request (``context``), by the same function
for the server (its watched cluster state) and for ``vgate eval`` (its model of the cluster), both
read through the one ``ClusterView`` protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .admission import AdmissionRequest
from .config import Config
from .contract import EngineInput
from .egress import NetworkObjects
from .patching import Mutator

PodSpecs = list[tuple[str, Any]]  # (where in the object, a pod spec there), as the kind's pods will carry it


class ClusterView(Protocol):
    """What kinds read of the cluster: ``cluster.state.ClusterState`` (the server's watched state)
    and ``offline.chain.model.Cluster`` (``vgate eval``'s model) implement it."""

    def namespace_queue(self, namespace: str) -> str | None:
        """The queue the namespace's Volcano annotation names, or None."""

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A pod as the view holds it, or None when it does not know it."""

    def pod_group(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A PodGroup as the view holds it, or None when it does not know it."""

    def holds_cluster(self) -> bool:
        """Whether the view holds the cluster's objects at all (False: cluster.watch is off)."""

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap read once (none is watched), or None when it does not exist or cannot be read."""

    def binding_context(self, namespace: str, pod_name: str, node_name: str, zone_label: str) -> dict[str, Any] | str:
        """A binding's pod, node, PodGroup and members placed; or why they cannot be told."""

    def note_bound(self, namespace: str, pod_name: str, node_name: str) -> None:
        """An allowed binding: the pod is on the node for the bindings that follow."""

    def network(self) -> NetworkObjects | str | None:
        """What effective egress is computed from; why it cannot be told yet; None: not watched."""


class NoCluster:
    """The view without ``cluster.watch``: no queue annotations, no pods, and no binding can be judged."""

    def namespace_queue(self, namespace: str) -> str | None:
        return None

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def pod_group(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def holds_cluster(self) -> bool:
        return False

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def binding_context(self, namespace: str, pod_name: str, node_name: str, zone_label: str) -> dict[str, Any] | str:
        return "vgate judges bindings from the cluster state, and cluster.watch is off"

    def note_bound(self, namespace: str, pod_name: str, node_name: str) -> None:
        return None

    def network(self) -> NetworkObjects | str | None:
        return None


NO_CLUSTER = NoCluster()


@dataclass(frozen=True)
class KindContext:
    """What the cluster adds to one request, given alike to mutation, validation and the record."""

    namespace_queue: str | None = None  # the namespace's Volcano queue annotation
    binding: Mapping[str, Any] | str | None = None  # a binding's pod, node and PodGroup; or why not known
    inherited: Mapping[str, str] | None = None  # labels a Spark executor takes from its driver
    contrary: tuple[str, ...] = ()  # its own labels that would weaken its driver's classification
    unknown_owner: str | None = None  # an owner pod the view does not hold (yet)
    unknown_group: str | None = None  # a sensitive member's PodGroup the view does not hold (yet)
    spark_defaults: Mapping[str, str] | str | None = None  # a sparkConfigMap's settings, or why not read
    network: NetworkObjects | str | None = None  # what effective egress reads; why not known; None: not watched


NO_CONTEXT = KindContext()  # what a request reads of the cluster when nothing was read


@dataclass(frozen=True)
class Judged:
    """One thing the engine evaluates for a request: the title its messages get, the object whose
    labels exceptions match, and the input."""

    title: str
    obj: dict[str, Any]
    evaluated: EngineInput


def with_input(judged: Judged, key: str, value: Any) -> Judged:
    """``judged`` with ``input.<key>`` added: a fact the rules read beside the request."""
    return Judged(judged.title, judged.obj, EngineInput.of({**judged.evaluated.document, key: value}))


def namespace_context(request: AdmissionRequest, view: ClusterView, config: Config) -> KindContext:
    """The context every kind needs: its namespace's queue (what mutation assigns, and what a pod
    a controller makes is judged with)."""
    return KindContext(namespace_queue=view.namespace_queue(request.namespace) if request.namespace else None)


def as_submitted(request: AdmissionRequest, config: Config, context: KindContext) -> list[Judged]:
    """The request judged as the API server sent it."""
    return [Judged("", request.object or request.old_object or {}, EngineInput(request.raw, request.review))]


def always(request: AdmissionRequest) -> bool:
    return True


def no_limit(obj: Mapping[str, Any], config: Config) -> str | None:
    return None


def nothing_recorded(request: AdmissionRequest, context: KindContext, config: Config) -> dict[str, Any]:
    return {}


def nothing_learned(request: AdmissionRequest, view: ClusterView) -> None:
    return None


@dataclass(frozen=True)
class KindHandler:
    """A kind's behaviour. ``pod_specs`` and ``judged`` are what the judged paths read: required."""

    # (where, pod spec) of every pod the object is or will make: the size limits count their containers
    pod_specs: Callable[[Mapping[str, Any]], PodSpecs]
    # what the engine evaluates (raises SparkSpecError for a spec whose pods cannot be told, and
    # EvaluationError for what cannot be judged now; the failure mode answers it)
    judged: Callable[[AdmissionRequest, Config, KindContext], list[Judged]]
    context: Callable[[AdmissionRequest, ClusterView, Config], KindContext] = namespace_context
    mutator: Mutator | None = None  # what /mutate does on CREATE; None: never patched
    new_pods: Callable[[AdmissionRequest], bool] = always  # False: the write makes no pod to judge
    limits: Callable[[Mapping[str, Any], Config], str | None] = no_limit  # a count beyond the pod specs'
    record: Callable[[AdmissionRequest, KindContext, Config], dict[str, Any]] = nothing_recorded
    admitted: Callable[[AdmissionRequest, ClusterView], None] = nothing_learned  # the view learns it
    template: Callable[[Mapping[str, Any] | None], dict[str, Any] | None] | None = None  # a controller's
    # what ``judged`` gives the engine are pods (or make them: a Volcano Job's tasks), whose effective
    # egress is judged when sensitive; False for what only carries a workload's labels (a PodGroup)
    judges_pods: bool = False
    # what the object says that vgate does not judge (a Spark application's unmodelled sparkConf
    # keys): the decision's warnings, never ignored silently
    warnings: Callable[[AdmissionRequest], list[str]] = lambda request: []
