"""What one write does to sensitive pods' effective egress: the facts ``input.egress`` gives the rules.

The rule ``network-egress-confined`` refuses; this module computes what it judges, from the cluster
view's NetworkPolicies, Namespaces, Pods and Services (``egress``):

- ``pods``: each sensitive pod the write makes or relabels (a Pod, a controller's template, a
  Volcano Job's task, a Spark application's driver and executors), whether it is confined, why not
  (the policy and rule that open a way out, or that no policy selects it, or a Service exposing
  it), and the policies that confine it.
- ``unconfines``: the sensitive pods already admitted that are confined now and would not be after
  the write (a NetworkPolicy created, changed or deleted, a Namespace relabelled, a pod created or
  relabelled so that it becomes a relay), each with the way out the write opens.
- ``exposes``: the sensitive pods a Service of type LoadBalancer or NodePort, one with
  ``externalIPs``, or an Ingress's backend Service would make reachable from outside.

Without a cluster view (``cluster.watch`` off) nothing is computed; a view that has not listed
every kind it needs cannot tell, which is an EvaluationError (answered per server.failureMode):
an unsynced cache never means "confined".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .admission import AdmissionRequest
from .config import PlacementSettings
from .egress import (
    AllowedPeer,
    Cluster,
    Egress,
    NetworkObjects,
    PodClass,
    egress_of,
    internal_networks,
    name_of,
    namespace_of,
)
from .errors import EvaluationError
from .workloads import labels_of, selector_matches, task_templates

NETWORK_POLICY = ("networking.k8s.io", "NetworkPolicy")
ADMIN_POLICY = ("policy.networking.k8s.io", "AdminNetworkPolicy")
BASELINE_POLICY = ("policy.networking.k8s.io", "BaselineAdminNetworkPolicy")
NAMESPACE = ("", "Namespace")
POD = ("", "Pod")
SERVICE = ("", "Service")
INGRESS = ("networking.k8s.io", "Ingress")
ADMIN_NETWORK_POLICIES = (("policy.networking.k8s.io/v1alpha1", "AdminNetworkPolicy"),
                          ("policy.networking.k8s.io/v1alpha1", "BaselineAdminNetworkPolicy"))  # (apiVersion, kind)
CHANGES_EGRESS = (NETWORK_POLICY, ADMIN_POLICY, BASELINE_POLICY, NAMESPACE, POD)  # writes changing what pods reach
EXPOSING_TYPES = ("LoadBalancer", "NodePort")


@dataclass(frozen=True)
class _Now:
    """The cluster as the view holds it, indexed once per version: its egress model and its sensitive
    pods by class (namespace, the labels selectors read), each with its pods (their names and labels)."""

    objects: NetworkObjects
    placement: PlacementSettings
    cluster: Cluster
    sensitive: Mapping[PodClass, tuple[Mapping[str, Any], ...]]


_last: list[_Now] = []  # the latest index (one per worker): rebuilt when the view's version changes


def egress_facts(request: AdmissionRequest, judged: Sequence[Mapping[str, Any]],
                 network: NetworkObjects | str | None, placement: PlacementSettings) -> dict[str, Any] | None:
    """``input.egress`` for a request whose judged objects are ``judged``; None when the write
    neither makes a sensitive pod nor can change one's egress or exposure, or without a view."""
    if network is None:  # no cluster view: nothing to compute from
        return None
    key = (request.group, request.kind)
    subjects = _subjects(request, judged, placement)
    if not subjects and key not in (*CHANGES_EGRESS, SERVICE, INGRESS):
        return None
    if isinstance(network, str):
        raise EvaluationError(f"cannot tell where sensitive pods may send traffic: {network}")
    now = _indexed(network, placement)
    facts: dict[str, Any] = {}
    if subjects:
        facts["pods"] = [_verdict(pod, now) for pod in subjects]
    after = _after(request, now) if key in CHANGES_EGRESS and now.sensitive else None
    if after is not None:
        facts["unconfines"] = _unconfined(now, after)
    exposed = _exposed(request, now) if key in (SERVICE, INGRESS) else []
    if exposed:
        facts["exposes"] = exposed
    return {k: v for k, v in facts.items() if v} or None


def pod_egress(pod: Mapping[str, Any], network: NetworkObjects, placement: PlacementSettings) -> dict[str, Any]:
    """One pod's effective egress as the cluster holds it now (confined, reasons, confining policies;
    a Service exposing it counts against it): what a snapshot of where sensitive pods run records."""
    return _verdict(pod, _indexed(network, placement))


def _indexed(objects: NetworkObjects, placement: PlacementSettings) -> _Now:
    if _last and _last[0].objects is objects and _last[0].placement == placement:
        return _last[0]
    cluster = _cluster(placement, objects)
    sensitive: dict[PodClass, list[Mapping[str, Any]]] = {}
    for pod in objects.pods:
        if placement.is_sensitive(labels_of(pod)):
            sensitive.setdefault(cluster.class_of(pod), []).append(pod)
    now = _Now(objects, placement, cluster, {klass: tuple(sorted(pods, key=name_of))
                                             for klass, pods in sensitive.items()})
    _last[:] = [now]
    return now


def _cluster(placement: PlacementSettings, objects: NetworkObjects) -> Cluster:
    settings = placement.egress
    return Cluster(objects.policies, objects.namespaces, objects.pods, internal_networks(settings.internal_cidrs),
                   tuple(AllowedPeer(namespace, selector) for namespace, selector in settings.allowed_peers),
                   objects.admin, objects.baseline,
                   internal_networks(settings.pod_cidrs) if settings.pod_cidrs else None)


def _subjects(request: AdmissionRequest, judged: Sequence[Mapping[str, Any]],
              placement: PlacementSettings) -> list[dict[str, Any]]:
    """The sensitive pods the write makes, as pods of the request's namespace (a Volcano Job's are its
    tasks' templates). A pod UPDATE makes one only when it changes the pod's labels: a running
    pod's other updates (an image, a finalizer) are not judged again."""
    if (request.group, request.kind) == POD and (request.sub_resource or (
            request.operation == "UPDATE" and labels_of(request.object or {}) == labels_of(request.old_object or {}))):
        return []
    pods: list[Mapping[str, Any]] = []
    for obj in judged:
        tasks: list[Mapping[str, Any]] = list(task_templates(obj))
        pods += tasks or [obj]
    return [{"metadata": {"namespace": request.namespace, "name": name_of(pod) or request.name,
                          "labels": labels_of(pod)}} for pod in pods if placement.is_sensitive(labels_of(pod))]


def _verdict(pod: Mapping[str, Any], now: _Now) -> dict[str, Any]:
    pod_class = now.cluster.class_of(pod)
    egress: Egress = (Egress(True, (), now.cluster.rules_of(pod_class).policies) if now.cluster.confined(pod_class)
                      else egress_of(pod, now.cluster))  # the search, for its reasons, only when it leads outside
    exposing = [f"Service {namespace_of(s)}/{name_of(s)} ({_exposure(s)}) selects it: reachable from outside the "
                "cluster" for s in now.objects.services if namespace_of(s) == namespace_of(pod) and _exposure(s)
                and _selects(s, labels_of(pod))]
    reasons = [*egress.reasons, *exposing]
    return {"pod": f"{namespace_of(pod)}/{name_of(pod)}", "confined": not reasons, "reasons": reasons,
            "policies": list(egress.policies)}


def _after(request: AdmissionRequest, now: _Now) -> Cluster | None:
    """The cluster as it would be after the write; None when the write changes nothing egress reads."""
    objects, new, old = now.objects, request.object, request.old_object
    namespaces, pods = objects.namespaces, objects.pods
    key = (request.group, request.kind)
    if key in (NETWORK_POLICY, ADMIN_POLICY, BASELINE_POLICY):
        field, before = {NETWORK_POLICY: ("policies", objects.policies), ADMIN_POLICY: ("admin", objects.admin),
                         BASELINE_POLICY: ("baseline", objects.baseline)}[key]
        written: list[Mapping[str, Any]] = [p for p in before
                                            if (namespace_of(p), name_of(p)) != (request.namespace, request.name)]
        written += [new] if new is not None and request.operation != "DELETE" else []
        changed: dict[str, Any] = {field: written}
        return _cluster(now.placement, replace(objects, **changed))
    if key == NAMESPACE:
        if new is None or labels_of(new) == namespaces.get(request.name, {}):
            return None
        namespaces = {**namespaces, request.name: labels_of(new)}
    elif key == POD:
        if new is None or request.sub_resource or request.operation not in ("CREATE", "UPDATE"):
            return None
        if request.operation == "UPDATE" and labels_of(new) == labels_of(old or {}):
            return None
        placed = {**new, "metadata": {**(new.get("metadata") or {}), "namespace": request.namespace}}
        if request.operation == "CREATE" and now.cluster.holds(now.cluster.class_of(placed)):
            return None  # pods labelled alike are already there: it reaches and is reached as they are
        pods = [p for p in pods if (namespace_of(p), name_of(p)) != (request.namespace, request.name)] + [placed]
    return _cluster(now.placement, replace(objects, namespaces=namespaces, pods=pods))


def _unconfined(now: _Now, after: Cluster) -> list[dict[str, Any]]:
    """The sensitive pods confined now whose egress ``after`` leads outside, with the way out."""
    found = []
    for pod_class, pods in now.sensitive.items():
        if not now.cluster.confined(pod_class):
            continue  # not confined before this write (another opened it: the report shows it)
        after_classes: dict[PodClass, list[Mapping[str, Any]]] = {}
        for pod in pods:  # the write's selectors may read labels the classes of now do not keep: classed again
            after_classes.setdefault(after.class_of(pod), []).append(pod)
        for after_class, moved in after_classes.items():
            if not after.confined(after_class):
                found.append({"pods": [f"{pod_class[0]}/{name_of(pod)}" for pod in moved],
                              "reason": egress_of(moved[0], after).reasons[0]})
    return sorted(found, key=lambda finding: finding["pods"])


def _exposed(request: AdmissionRequest, now: _Now) -> list[str]:
    """The sensitive pods of the namespace a Service (of an exposing type) or an Ingress (through
    the Services it names) would make reachable from outside."""
    obj = request.object
    if obj is None or request.operation == "DELETE":
        return []
    services: list[Mapping[str, Any]]
    if (request.group, request.kind) == SERVICE:
        services = [obj] if _exposure(obj) else []
    else:
        names = _ingress_backends(obj)
        services = [s for s in now.objects.services if namespace_of(s) == request.namespace and name_of(s) in names]
    # each pod's own labels, not its class's: a new Service may select by a label no class keeps
    return sorted(f"{namespace}/{name_of(pod)}" for (namespace, _), pods in now.sensitive.items()
                  if namespace == request.namespace for pod in pods
                  if any(_selects(service, labels_of(pod)) for service in services))


def _exposure(service: Mapping[str, Any]) -> str:
    """How a Service is reachable from outside the cluster ('' if it is not)."""
    spec = service.get("spec") or {}
    if spec.get("externalIPs"):
        return f"externalIPs {', '.join(map(str, spec['externalIPs']))}"
    return f"type {spec['type']}" if spec.get("type") in EXPOSING_TYPES else ""


def _selects(service: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = (service.get("spec") or {}).get("selector")
    return isinstance(selector, Mapping) and bool(selector) and selector_matches({"matchLabels": selector}, labels)


def _ingress_backends(ingress: Mapping[str, Any]) -> set[str]:
    spec = ingress.get("spec") or {}
    backends = [spec.get("defaultBackend") or {}]
    backends += [path.get("backend") or {} for rule in spec.get("rules") or [] if isinstance(rule, Mapping)
                 for path in (rule.get("http") or {}).get("paths") or [] if isinstance(path, Mapping)]
    return {str(backend["service"].get("name")) for backend in backends
            if isinstance(backend, Mapping) and isinstance(backend.get("service"), Mapping)}
