"""The admission chain, step by step, as a real API server runs it around vgate.

For a CREATE, in order (kube-apiserver's handler and ``pkg/kubeapiserver/options/plugins.go``):

1. decoding with defaults: built-in defaulting for core types (``core_defaults``), structural-schema
   defaults for custom resources (``crd_defaults``);
2. the built-in mutating admission plugins: ServiceAccount, Priority, DefaultTolerationSeconds
   (``plugins``; Pods only);
3. MutatingAdmissionPolicies (none modelled: vgate ships none);
4. mutating webhooks, configuration by configuration in name order: ``vgate`` before Volcano's
   ``volcano-admission-service-*-mutate`` (``volcano``, with ``--with-volcano``); after each
   webhook that patched, the object is decoded and defaulted again;
5. reinvocation: a webhook with ``reinvocationPolicy: IfNeeded`` (vgate's) whose object a later
   webhook changed is called once more, after the built-in plugins have run again;
6. validation (ValidatingAdmissionPolicies and validating webhooks) of the final object.

An UPDATE is decoded with defaults; the plugins and webhooks above act on CREATE only. The
webhooks' ``namespaceSelector`` is honoured: in a namespace vgate's configuration exempts by name,
or labelled ``vgate.io/exempt=true`` (give the Namespace object), vgate is not called at all.
Every step records what it changed as a JSON Patch, for ``vgate eval`` to show.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from ...cluster.state import NAMESPACES, ClusterState, shaped_inventory
from ...core.config import Config
from ...core.egress import NetworkObjects
from ...core.egress_judge import ADMIN_NETWORK_POLICIES
from ...core.errors import AdmissionRefused, ModelError
from ...core.kinds import KINDS, template_of
from ...core.queues import annotated_queue
from . import core_defaults, plugins, volcano
from .crd_defaults import CrdDefaults, apply_defaults, shipped_crds

EXEMPT_LABEL = "vgate.io/exempt"
VGATE_WEBHOOK = "mutate.vgate.io"
_VGATE_SOURCE = "vgate /mutate (deploy/mutatingwebhookconfiguration.yaml)"
_CORE_GROUPS = {"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
                "storage.k8s.io", "scheduling.k8s.io", "node.k8s.io", "discovery.k8s.io", "coordination.k8s.io",
                "admissionregistration.k8s.io", "apiextensions.k8s.io", "certificates.k8s.io", "events.k8s.io",
                "flowcontrol.apiserver.k8s.io", "resource.k8s.io", "admission.k8s.io", "authentication.k8s.io",
                "authorization.k8s.io", "apiregistration.k8s.io", "storagemigration.k8s.io",
                "internal.apiserver.k8s.io"}
# The built-in kinds the registry judges by a pod template: Kubernetes defaults their templates as pod specs
# (a CRD's, such as a Spark application's, gets its CRD's structural defaults instead)
_POD_CONTROLLERS = {(kind.group, kind.kind) for kind in KINDS if kind.handler.template is not None
                    and kind.group in _CORE_GROUPS}
# What the chart's mutating webhook is sent: the registry's mutated kinds (core/kinds.py)
_VGATE_MUTATES = {(kind.group, kind.kind) for kind in KINDS if kind.mutated}
_K8S = "kubernetes/kubernetes "
_VOLCANO = "volcano-sh/volcano pkg/webhooks/admission/"


@dataclass(frozen=True)
class Step:
    """One link of the chain and what it changed."""

    name: str
    source: str
    patch: list[dict[str, Any]]
    before: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)  # the object it changed


@dataclass
class Cluster:
    """What the model knows of the cluster: CRDs, Namespaces, PriorityClasses, Volcano's webhooks."""

    crds: dict[tuple[str, str], CrdDefaults] = field(default_factory=dict)
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    priority_classes: dict[str, plugins.PriorityClass] = field(default_factory=dict)
    exempt_names: frozenset[str] = frozenset()
    with_volcano: bool = False
    resource_groups: list[dict[str, Any]] = field(default_factory=list)
    # Volcano's admission paths its webhook-manager serves (--enabled-admission); None: every mutator
    volcano_admissions: frozenset[str] | None = None
    # Nodes given, and the Pods and PodGroups admitted: what a Binding among the manifests is judged against
    placed: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    # Whether the cluster's NetworkPolicies are known (given among the manifests, or read with
    # --kubeconfig): only then is a sensitive pod's effective egress computed
    network_known: bool = False

    @classmethod
    def build(cls, config: Config, extra_crds: Iterable[CrdDefaults] = (), *,
              with_volcano: bool = False, resource_groups: list[dict[str, Any]] | None = None,
              volcano_admissions: Iterable[str] | None = None) -> "Cluster":
        """The shipped Volcano CRDs (replaced by ``extra_crds`` of the same kind) and the
        PriorityClasses the gateway config names, with its globalDefault."""
        crds = {(crd.group, crd.kind): crd for crd in [*shipped_crds(), *extra_crds]}
        classes = {name: plugins.PriorityClass(name, value, name == config.global_default_priority_class)
                   for name, value in config.priority_values.items()}
        exempt = frozenset(config.exempt_namespaces)
        return cls(crds, {}, classes, exempt, with_volcano, resource_groups or [],
                   None if volcano_admissions is None else frozenset(volcano_admissions))

    def learn(self, manifest: dict[str, Any]) -> bool:
        """Take a Namespace, PriorityClass or Node from the manifests as cluster state; True if it was one."""
        kind, metadata = manifest.get("kind"), manifest.get("metadata") or {}
        if (manifest.get("apiVersion"), kind) in (("v1", "Node"), ("networking.k8s.io/v1", "NetworkPolicy"),
                                                  ("v1", "Service"), ("v1", "ConfigMap"), *ADMIN_NETWORK_POLICIES):
            self.remember(manifest)
            self.network_known = self.network_known or kind in ("NetworkPolicy", *(k for _, k in
                                                                                   ADMIN_NETWORK_POLICIES))
            return True
        if manifest.get("apiVersion") == "v1" and kind == "Namespace":
            self.namespaces[str(metadata.get("name", ""))] = metadata
            return True
        if str(manifest.get("apiVersion", "")).startswith("scheduling.k8s.io/") and kind == "PriorityClass":
            name = str(metadata.get("name", ""))
            self.priority_classes[name] = plugins.PriorityClass(
                name, int(manifest.get("value", 0)), manifest.get("globalDefault") is True,
                manifest.get("preemptionPolicy") or "PreemptLowerPriority")
            return True
        return False

    def remember(self, obj: dict[str, Any]) -> None:
        """Keep an object a Binding may name (a Node, or a Pod or PodGroup as the API server stored it)."""
        metadata = obj.get("metadata") or {}
        key = (str(obj.get("apiVersion")), str(obj.get("kind")), str(metadata.get("namespace") or ""),
               str(metadata.get("name") or ""))
        self.placed[key] = obj

    def note_bound(self, namespace: str, pod_name: str, node_name: str) -> None:
        """An allowed Binding: the pod is on ``node_name`` for the bindings that follow."""
        key = ("v1", "Pod", namespace, pod_name)
        if key in self.placed:
            found = self.placed[key]
            self.placed[key] = {**found, "spec": {**(found.get("spec") or {}), "nodeName": node_name}}

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Pod given or admitted before (a Spark executor's driver, a Binding's pod), or None."""
        return self.placed.get(("v1", "Pod", namespace, name))

    def holds_cluster(self) -> bool:
        """The model holds what was given and admitted: a member's PodGroup among them is known."""
        return True

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap given among the manifests (a SparkApplication's sparkConfigMap), or None."""
        return self.placed.get(("v1", "ConfigMap", namespace, name))

    def pod_group(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A PodGroup given or admitted before (a member's), or None."""
        return self.placed.get(("scheduling.volcano.sh/v1beta1", "PodGroup", namespace, name))

    def binding_context(self, namespace: str, pod_name: str, node_name: str, zone_label: str) -> dict[str, Any] | str:
        """What the server's cluster state would give a Binding's rules, from the objects given here."""
        return ClusterState.of_objects(self.placed.values()).binding_context(namespace, pod_name, node_name,
                                                                             zone_label)

    def network(self) -> NetworkObjects | None:
        """The NetworkPolicies, Services and Pods given or admitted, and the Namespaces given: what
        effective egress is computed from; None (not computed) when the NetworkPolicies are not known."""
        def placed(api_version: str, kind: str) -> list[dict[str, Any]]:
            return [obj for (version, k, _, _), obj in self.placed.items() if (version, k) == (api_version, kind)]
        if not self.network_known:
            return None
        policies = placed("networking.k8s.io/v1", "NetworkPolicy")
        namespaces = {name: {**(metadata.get("labels") or {}), "kubernetes.io/metadata.name": name}  # as the
                      for name, metadata in self.namespaces.items()}  # API server labels every namespace
        return NetworkObjects((), policies, namespaces, placed("v1", "Pod"), placed("v1", "Service"),
                              *(placed(version, kind) for version, kind in ADMIN_NETWORK_POLICIES))

    def namespace_queue(self, namespace: str) -> str | None:
        """The queue a Namespace given to the model names in Volcano's annotation, as the server's
        cluster state reads it; None when not annotated (or not given)."""
        return annotated_queue(self.namespaces.get(namespace))

    def inventory(self) -> dict[str, Any]:
        """The Namespaces given to the model as the server's policies see the cluster state
        (``data.inventory``, Gatekeeper's shape)."""
        kept = {("", name): NAMESPACES.project({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
                for name, metadata in self.namespaces.items()}
        return shaped_inventory([(NAMESPACES, kept)])

    def calls_vgate(self, namespace: str) -> bool:
        """Whether the webhooks' namespaceSelector lets the API server call vgate in ``namespace``."""
        labels = (self.namespaces.get(namespace) or {}).get("labels") or {}
        return namespace not in self.exempt_names and labels.get(EXEMPT_LABEL) != "true"


@dataclass
class Delivery:
    """The object at each point vgate cares about, and the steps between."""

    delivered: dict[str, Any]  # as vgate's /mutate first receives it
    final: dict[str, Any]  # after every mutating step: what validation judges
    steps: list[Step]
    vgate_patch: list[dict[str, Any]]  # vgate's first pass
    refused: str | None = None  # a built-in plugin's refusal, before any webhook
    vgate_called: bool = True


Mutator = Callable[[dict[str, Any]], list[dict[str, Any]]]  # vgate's /mutate: object in, JSON Patch out


def deliver(manifest: dict[str, Any], namespace: str, operation: str, cluster: Cluster, vgate: Mutator) -> Delivery:
    """Run ``manifest`` through the chain; raise ModelError for an object the model cannot default."""
    group, _, version = str(manifest.get("apiVersion", "")).rpartition("/")
    kind = str(manifest.get("kind", ""))
    default = _defaulter(group, version, kind, cluster)
    obj = copy.deepcopy(manifest)
    obj.setdefault("metadata", {})["namespace"] = namespace
    steps: list[Step] = []

    def step(name: str, source: str, change: Callable[[dict[str, Any]], None]) -> bool:
        """Apply one link of the chain; record and say whether it changed the object."""
        before = copy.deepcopy(obj)
        change(obj)
        patch = jsonpatch.make_patch(before, obj).patch
        if patch:
            steps.append(Step(name, source, patch, before))
        return bool(patch)

    step("API server defaulting", default.source, default)
    is_pod_create = operation == "CREATE" and (group, kind) == ("", "Pod")
    try:
        if is_pod_create:
            _run_plugins(step, cluster)
    except AdmissionRefused as refusal:
        return Delivery(obj, obj, steps, [], refused=str(refusal))
    delivered = copy.deepcopy(obj)
    if operation != "CREATE":
        return Delivery(delivered, obj, steps, [], vgate_called=False)
    vgate_called = cluster.calls_vgate(namespace) and (group, kind) in _VGATE_MUTATES
    first_patch: list[dict[str, Any]] = []
    vgate_ran = changed_after_vgate = False
    for webhook in _webhooks(group, kind, namespace, cluster, vgate_called):
        if webhook.name == VGATE_WEBHOOK:
            first_patch, vgate_ran = vgate(obj), True
            changed = step(f"webhook {webhook.name}", webhook.source, _applying(first_patch))
        else:
            changed = step(f"webhook {webhook.name}", webhook.source, webhook.mutate)
        if changed:
            step(f"API server defaulting (after {webhook.name})", default.source, default)
            changed_after_vgate = changed_after_vgate or (vgate_ran and webhook.name != VGATE_WEBHOOK)
    if changed_after_vgate:
        if is_pod_create:
            _run_plugins(step, cluster, again=True)
        again = vgate(obj)
        step(f"webhook {VGATE_WEBHOOK} (reinvoked: reinvocationPolicy IfNeeded)", _VGATE_SOURCE, _applying(again))
        step("API server defaulting (after the reinvocation)", default.source, default)
    return Delivery(delivered, obj, steps, first_patch, vgate_called=vgate_called)


class _Defaulter:
    def __init__(self, source: str, apply: Callable[[dict[str, Any]], None]) -> None:
        self.source, self._apply = source, apply

    def __call__(self, obj: dict[str, Any]) -> None:
        self._apply(obj)


def _defaulter(group: str, version: str, kind: str, cluster: Cluster) -> _Defaulter:
    if (group, kind) == ("", "Pod"):
        return _Defaulter(_K8S + "pkg/apis/core/v1/defaults.go (SetDefaults_Pod, _PodSpec, _Container, ...)",
                          core_defaults.default_pod)
    if (group, kind) in _POD_CONTROLLERS:
        return _Defaulter(_K8S + "pkg/apis/core/v1/defaults.go (the pod template: SetDefaults_PodSpec, ...)",
                          lambda obj: _default_template(obj, group, kind))
    crd = cluster.crds.get((group, kind))
    if crd is not None:
        if version not in crd.versions:
            raise ModelError(f"the CRD of {kind}.{group} ({crd.source}) has no version {version!r}: "
                             f"it serves {', '.join(sorted(crd.versions))}")
        schema = crd.versions[version]
        return _Defaulter(f"structural-schema defaults of {kind}.{group}/{version} ({crd.source})",
                          lambda obj: apply_defaults(obj, schema))
    if group in _CORE_GROUPS:
        return _Defaulter("(a kind vgate does not judge: not defaulted by the model)", lambda obj: None)
    raise ModelError(f"cannot default {kind} of {group}/{version}: no CRD for it (give one with --crd FILE, "
                     "or judge the manifest as written with --as-submitted)")


def _default_template(obj: dict[str, Any], group: str, kind: str) -> None:
    core_defaults.default_controller(obj, kind)
    template = template_of(obj, group, kind)
    if template is not None and isinstance(template.get("spec"), dict):
        core_defaults.default_pod_spec(template["spec"])


def _run_plugins(step: Callable[..., bool], cluster: Cluster, again: bool = False) -> None:
    suffix = " (again, before the reinvocation)" if again else ""
    step("ServiceAccount admission" + suffix, _K8S + "plugin/pkg/admission/serviceaccount", plugins.service_account)
    step("Priority admission" + suffix, _K8S + "plugin/pkg/admission/priority",
         lambda pod: plugins.priority(pod, cluster.priority_classes))
    step("DefaultTolerationSeconds admission" + suffix, _K8S + "plugin/pkg/admission/defaulttolerationseconds",
         plugins.default_toleration_seconds)


@dataclass(frozen=True)
class _Webhook:
    name: str
    source: str
    mutate: Callable[[dict[str, Any]], None]


def _webhooks(group: str, kind: str, namespace: str, cluster: Cluster, vgate_called: bool) -> list[_Webhook]:
    """The mutating webhooks that match, in the API server's order (configuration name, then list)."""
    hooks: list[tuple[str, _Webhook]] = []
    if vgate_called:
        hooks.append(("vgate", _Webhook(VGATE_WEBHOOK, _VGATE_SOURCE, lambda o: None)))
    if cluster.with_volcano:
        annotations = (cluster.namespaces.get(namespace) or {}).get("annotations") or {}
        volcano_hooks = {
            ("batch.volcano.sh", "Job"): ("volcano-admission-service-jobs-mutate", "mutatejob.volcano.sh",
                                          "jobs/mutate/mutate_job.go", volcano.mutate_job),
            ("scheduling.volcano.sh", "PodGroup"): (
                "volcano-admission-service-podgroups-mutate", "mutatepodgroup.volcano.sh",
                "podgroups/mutate/mutate_podgroup.go", lambda o: volcano.mutate_pod_group(o, annotations)),
            ("", "Pod"): ("volcano-admission-service-pods-mutate", "mutatepod.volcano.sh", "pods/mutate/mutate_pod.go",
                          lambda o: volcano.mutate_pod(o, namespace, cluster.resource_groups)),
        }
        if (group, kind) in volcano_hooks:
            configuration, name, source, mutate = volcano_hooks[(group, kind)]
            path = "/" + source.rsplit("/", 1)[0]  # "/podgroups/mutate": as --enabled-admission names it
            if cluster.volcano_admissions is None or path in cluster.volcano_admissions:
                hooks.append((configuration, _Webhook(name, _VOLCANO + source, mutate)))
    return [hook for _, hook in sorted(hooks, key=lambda pair: pair[0])]


def _applying(patch: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """A step that applies a webhook's JSON Patch in place (callers keep their reference to the dict)."""
    def apply(obj: dict[str, Any]) -> None:
        patched = jsonpatch.apply_patch(obj, patch)
        obj.clear()
        obj.update(patched)
    return apply
