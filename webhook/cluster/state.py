"""Cluster state: the kinds vgate's rules and mutation need, watched, with their freshness.

``ClusterState`` runs one informer per kind and answers the gateway's questions (a namespace's
Volcano queue annotation) and /readyz's (synced? how stale?). Its objects are shaped as
Gatekeeper's replicated ``data.inventory`` (``cluster[groupVersion][kind][name]``,
``namespace[ns][groupVersion][kind][name]``) by ``inventory``, so rules written for Gatekeeper's
inventory read them unchanged.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..core.bindings import GROUP_ANNOTATION
from ..core.egress import NetworkObjects, name_of
from ..core.queues import QUEUE_ANNOTATION, annotated_queue
from ..core.workloads import labels_of
from .api import ApiServer
from .informer import Informer, Watched

KEPT_POD_ANNOTATIONS = (GROUP_ANNOTATION, QUEUE_ANNOTATION)
log = logging.getLogger("vgate")


def _interned(mapping: Any) -> dict[str, str]:
    """Labels with their keys and values interned: 100,000 pods share a few hundred distinct strings."""
    if not isinstance(mapping, dict):
        return {}
    return {sys.intern(str(key)): sys.intern(str(value)) for key, value in mapping.items()}


def _metadata(obj: dict[str, Any], annotations: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The metadata rules read: name, namespace, labels, annotations (only ``annotations`` if given)."""
    metadata = obj.get("metadata") or {}
    kept: dict[str, Any] = {key: metadata[key] for key in ("name", "namespace") if key in metadata}
    if metadata.get("labels"):
        kept["labels"] = _interned(metadata["labels"])
    found = metadata.get("annotations") or {}
    if annotations is not None:
        found = {key: found[key] for key in annotations if key in found}
    if found:
        kept["annotations"] = _interned(found)
    owners = [{"kind": sys.intern(str(owner.get("kind"))), "name": owner.get("name")}
              for owner in metadata.get("ownerReferences") or [] if isinstance(owner, dict)]
    if owners:
        kept["ownerReferences"] = owners
    return kept


def _object(obj: dict[str, Any], metadata: dict[str, Any], **rest: Any) -> dict[str, Any]:
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": metadata, **rest}


def _spec(obj: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    return {key: spec[key] for key in keys if key in spec}


def _namespace(obj: dict[str, Any]) -> dict[str, Any]:
    return _object(obj, _metadata(obj))


def _node(obj: dict[str, Any]) -> dict[str, Any]:
    """A node's labels and taints, and who last wrote each label (``labelManagers``, from its
    managedFields: the evidence of who set its zone). Its status (heartbeats every few seconds) is not
    kept, so those changes change nothing here and do not resend the inventory."""
    metadata = _metadata(obj, ())
    managers = label_managers(obj)
    if managers:
        metadata["labelManagers"] = managers
    return _object(obj, metadata, spec=_spec(obj, ("taints", "unschedulable")))


def label_managers(obj: dict[str, Any]) -> dict[str, str]:
    """Per label, the field manager that wrote it last ("kubectl-label, Update, <time>"), as the API
    server's server-side field tracking records it; the kubelet's heartbeats own no label."""
    found: dict[str, tuple[str, str]] = {}
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, dict):
            continue
        labels = (((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {})
        when = str(entry.get("time") or "")
        for field in labels:
            if field.startswith("f:") and when >= found.get(field[2:], ("", ""))[0]:
                found[field[2:]] = (when, f"{entry.get('manager')}, {entry.get('operation')}, {when}")
    return {key: sys.intern(described) for key, (_, described) in found.items()}


def _pod(obj: dict[str, Any]) -> dict[str, Any]:
    """What a binding's rules and the placement report need of a pod, and no more: its labels, its
    PodGroup, its owner, where it is bound and what it asked of its node."""
    spec = _spec(obj, ("nodeName", "nodeSelector", "runtimeClassName", "schedulerName"))
    required = ((((obj.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    if "nodeSelector" in spec:
        spec["nodeSelector"] = _interned(spec["nodeSelector"])
    return _object(obj, _metadata(obj, KEPT_POD_ANNOTATIONS), spec=spec)


def _with_spec(keys: tuple[str, ...]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Metadata and these spec fields, never status: a Queue's or PodGroup's status changes with every job."""
    return lambda obj: _object(obj, _metadata(obj), spec=_spec(obj, keys))


def _priority_class(obj: dict[str, Any]) -> dict[str, Any]:
    return _object(obj, _metadata(obj), **{key: obj[key] for key in ("value", "globalDefault") if key in obj})


def _pod_group_of(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)


NAMESPACES = Watched("v1", "Namespace", "/api/v1/namespaces", False, _namespace)
NODES = Watched("v1", "Node", "/api/v1/nodes", False, _node)
QUEUES = Watched("scheduling.volcano.sh/v1beta1", "Queue", "/apis/scheduling.volcano.sh/v1beta1/queues", False,
                 _with_spec(("weight", "capability", "reclaimable", "parent")))
PRIORITY_CLASSES = Watched("scheduling.k8s.io/v1", "PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses",
                           False, _priority_class)
# Pods and PodGroups grow with the workload: kept for bindings and the placement record, not given
# to policies as data.inventory (which is resent whole to the evaluator when it changes).
PODS = Watched("v1", "Pod", "/api/v1/pods", True, _pod, in_inventory=False, index=_pod_group_of)
POD_GROUPS = Watched("scheduling.volcano.sh/v1beta1", "PodGroup", "/apis/scheduling.volcano.sh/v1beta1/podgroups",
                     True, _with_spec(("minMember", "queue", "priorityClassName")), in_inventory=False)
# Effective egress (core/egress.py): a policy's selector, types and egress rules; a Service's type,
# selector and external addresses (whether it exposes the pods it selects outside the cluster).
NETWORK_POLICIES = Watched("networking.k8s.io/v1", "NetworkPolicy", "/apis/networking.k8s.io/v1/networkpolicies",
                           True, _with_spec(("podSelector", "policyTypes", "egress")), in_inventory=False)
SERVICES = Watched("v1", "Service", "/api/v1/services", True, _with_spec(("type", "selector", "externalIPs")),
                   in_inventory=False)
# sig-network's admin tiers above and below NetworkPolicies, where their CRDs are installed (optional).
ADMIN_POLICIES = Watched("policy.networking.k8s.io/v1alpha1", "AdminNetworkPolicy",
                         "/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies", False,
                         _with_spec(("priority", "subject", "egress")), in_inventory=False, optional=True)
BASELINE_POLICIES = Watched("policy.networking.k8s.io/v1alpha1", "BaselineAdminNetworkPolicy",
                            "/apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies", False,
                            _with_spec(("subject", "egress")), in_inventory=False, optional=True)
Store = Mapping[tuple[str, str], dict[str, Any]]  # (namespace, name) -> the object kept


def shaped_inventory(stores: Iterable[tuple[Watched, Store]]) -> dict[str, Any]:
    """Objects of each watched kind in Gatekeeper's ``data.inventory`` shape: what the server's
    evaluator is given and what `vgate eval` gives its rules."""
    shaped: dict[str, Any] = {"cluster": {}, "namespace": {}}
    for watched, store in stores:
        for (namespace, name), obj in list(store.items()):
            where = shaped["namespace"].setdefault(namespace, {}) if watched.namespaced else shaped["cluster"]
            where.setdefault(watched.group_version, {}).setdefault(watched.kind, {})[name] = obj
    return shaped


KINDS = {watched.kind: watched for watched in (NAMESPACES, NODES, QUEUES, PRIORITY_CLASSES, PODS, POD_GROUPS,
                                               NETWORK_POLICIES, SERVICES, ADMIN_POLICIES, BASELINE_POLICIES)}
# what effective egress is computed from
NETWORK_KINDS = ("NetworkPolicy", "Namespace", "Pod", "Service", "AdminNetworkPolicy", "BaselineAdminNetworkPolicy")
RECENT_BIND_SECONDS = 300.0  # how long a binding this worker allowed counts before the pod watch shows it


def _never_connect() -> ApiServer:
    raise RuntimeError("this cluster state holds given objects and watches nothing")


class ClusterState:
    """The watched kinds of one worker, and what the gateway and the probes ask of them."""

    def __init__(self, connect: Callable[[], ApiServer], kinds: Iterable[Watched] = KINDS.values(), *,
                 watch_seconds: int = 300) -> None:
        self.informers = {watched.kind: Informer(connect, watched, watch_seconds=watch_seconds)
                          for watched in kinds}
        self._shaped: tuple[int, dict[str, Any]] = (-1, {})
        self._bound: dict[tuple[str, str], tuple[str, float]] = {}  # bindings this worker allowed, not yet watched
        self._network: NetworkObjects | None = None  # what effective egress reads, at its version
        self._connect = connect
        self._api: ApiServer | None = None  # for the rare object the watch has not delivered yet
        self._lookups = threading.Lock()

    @classmethod
    def of_objects(cls, objects: Iterable[dict[str, Any]]) -> ClusterState:
        """A cluster state holding these objects and nothing else, never watching: `vgate eval`'s and
        `vgate test`'s, so a Binding among their manifests is judged by the server's own code."""
        state = cls(_never_connect)
        by_type = {(watched.group_version, watched.kind): watched.kind for watched in KINDS.values()}
        for obj in objects:
            kind = by_type.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
            if kind is not None:
                state.informers[kind].put(obj)
        for informer in state.informers.values():
            informer.synced.set()
        return state

    def start(self) -> None:
        for informer in self.informers.values():
            informer.start()

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def synced(self) -> bool:
        """Whether every kind has been listed once (before that, nothing is known)."""
        return all(informer.synced.is_set() for informer in self.informers.values())

    def freshness(self, now: float) -> dict[str, dict[str, Any]]:
        """Per kind: synced, objects held, seconds since the API server last answered, the last error."""
        return {kind: {"synced": informer.synced.is_set(), "objects": len(informer.store),
                       "contactAgeSeconds": None if informer.last_contact is None
                       else round(now - informer.last_contact, 1), "error": informer.error}
                for kind, informer in self.informers.items()}

    def namespace_queue(self, namespace: str) -> str | None:
        """The queue Volcano takes from the namespace's annotation; None if it names none."""
        found = self._get("Namespace", "", namespace)
        return annotated_queue((found or {}).get("metadata"))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A pod as kept (metadata, placement fields), or None if the watch has not delivered it."""
        return self._get("Pod", namespace, name)

    def pod_group(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A PodGroup as kept (metadata, minMember, queue); one the watch has not delivered yet (a
        PodGroup and its members applied together, `kubectl apply -f gang.yaml`) is asked of the API
        server once; None if it does not exist or cannot be read."""
        return self._get("PodGroup", namespace, name) or self._look_up(POD_GROUPS, namespace, name)

    def holds_cluster(self) -> bool:
        return True

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap a SparkApplication names (sparkConfigMap), read once: none is watched, and the
        chart's role may get one by name, never list or watch them."""
        return self._read(f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    def _look_up(self, watched: Watched, namespace: str, name: str) -> dict[str, Any] | None:
        if watched.kind not in self.informers:
            return None
        group_version, plural = watched.path.rsplit("/", 1)
        found = self._read(f"{group_version}/namespaces/{namespace}/{plural}/{name}")
        return watched.project(found) if found is not None else None

    def _read(self, path: str) -> dict[str, Any] | None:
        """One GET of an object; None if it does not exist or cannot be read (the caller answers it)."""
        if self._connect is _never_connect:
            return None
        try:
            with self._lookups:
                if self._api is None:
                    self._api = self._connect()
                return self._api.get(path, timeout=2)
        except Exception as exc:  # noqa: BLE001 - not found, or not reachable: the caller answers "not known"
            log.debug("cannot read %s from the API server: %s", path, exc)
            return None

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        informer = self.informers.get(kind)
        return informer.get(namespace, name) if informer is not None else None

    def binding_context(self, namespace: str, pod_name: str, node_name: str, zone_label: str) -> dict[str, Any] | str:
        """What a binding's rules judge (``input.binding``): the pod, the node, the pod's PodGroup and
        where its other members are placed; or why it cannot be told (a kind not listed yet, a pod or
        node the watch has not delivered yet), which the caller answers per server.failureMode."""
        missing = [kind for kind in ("Pod", "Node") if kind not in self.informers
                   or not self.informers[kind].synced.is_set()]
        if missing:
            return f"the cluster state has not been listed yet: {', '.join(missing)}"
        pod = self._get("Pod", namespace, pod_name)
        if pod is None:
            return f"pod {namespace}/{pod_name} is not in vgate's cluster state yet (created moments ago?)"
        node = self._get("Node", "", node_name)
        if node is None:
            return f"node {node_name} is not in vgate's cluster state yet (added moments ago?)"
        group = _pod_group_of(pod)
        return {"pod": pod, "node": node, "podGroup": self._get("PodGroup", namespace, group) if group else None,
                "members": self._members(namespace, pod_name, group, zone_label) if group else []}

    def _members(self, namespace: str, pod_name: str, group: str, zone_label: str) -> list[dict[str, Any]]:
        """The zones the PodGroup's other placed pods occupy, each with the first of them (by name) there:
        the watched pods with a nodeName, and the bindings this worker allowed that the watch has not shown.

        One entry per zone, not per pod: the rules judge the set of zones (a split names a pod of each),
        and a 1,000-pod gang's bindings each carried the 999 others before (O(n²): 37 ms of CPU per pod
        in bench/gang.py, past the RVM's instruction budget), as did the hourly scan of its pods."""
        now = time.monotonic()
        informer = self.informers["Pod"]
        placed: dict[str, str] = {}
        for name in informer.indexed.get((namespace, group), ()):
            node = ((informer.get(namespace, name) or {}).get("spec") or {}).get("nodeName")
            if node and name != pod_name:
                placed[name] = node
        for (bound_namespace, name), (node, at) in list(self._bound.items()):
            if now - at > RECENT_BIND_SECONDS:
                self._bound.pop((bound_namespace, name), None)
            elif bound_namespace == namespace and name != pod_name and name not in placed and \
                    _pod_group_of(informer.get(namespace, name) or {"metadata": {}}) == group:
                placed[name] = node
        node_zones: dict[str, Any] = {}
        zones: dict[Any, dict[str, Any]] = {}
        for name, node in placed.items():  # one pass, the first name per zone kept: no sort per binding
            if node not in node_zones:
                node_zones[node] = ((self._get("Node", "", node) or {}).get("metadata", {}).get("labels")
                                    or {}).get(zone_label)
            zone = node_zones[node]
            if zone not in zones or name < zones[zone]["pod"]:
                zones[zone] = {"pod": name, "node": node, "zone": zone}
        return sorted(zones.values(), key=lambda member: member["pod"])

    def network(self) -> NetworkObjects | str | None:
        """NetworkPolicies, Namespaces' labels, Pods and Services as held now (their version: the
        informers' change counts); or why they cannot be told yet (a kind not listed: never "confined")."""
        missing = [kind for kind in NETWORK_KINDS if kind not in self.informers
                   or not self.informers[kind].synced.is_set()]
        if missing:
            return f"the cluster state has not been listed yet: {', '.join(missing)}"
        stores = [self.informers[kind].store for kind in NETWORK_KINDS]
        # pods count by the label sets they come in: a pod more or less of a set already there changes
        # no verdict (messages may then name a pod of the set that has gone), and pods churn all day
        version = tuple(self.informers[kind].label_set_changes if kind == "Pod" else self.informers[kind].changes
                        for kind in NETWORK_KINDS)
        if self._network is None or self._network.version != version:
            policies, namespaces, pods, services, admin, baseline = (list(store.values()) for store in stores)
            self._network = NetworkObjects(version, policies, {name_of(n): labels_of(n) for n in namespaces}, pods,
                                           services, admin, baseline)
        return self._network

    def note_bound(self, namespace: str, pod_name: str, node_name: str) -> None:
        """A binding this worker allowed: its PodGroup's next member sees it before the pod watch does."""
        self._bound[(namespace, pod_name)] = (node_name, time.monotonic())

    def version(self) -> int:
        """Grows with every change of a kind given to policies: engines replace their inventory when it does."""
        return sum(informer.changes for informer in self.informers.values() if informer.watched.in_inventory)

    def versioned_inventory(self) -> tuple[int, dict[str, Any]]:
        """The inventory and its version, shaped once per version."""
        version = self.version()
        if self._shaped[0] != version:
            self._shaped = (version, self.inventory())
        return self._shaped

    def inventory(self) -> dict[str, Any]:
        """Every object kept, in Gatekeeper's ``data.inventory`` shape."""
        return shaped_inventory((informer.watched, informer.store) for informer in self.informers.values()
                                if informer.watched.in_inventory)
