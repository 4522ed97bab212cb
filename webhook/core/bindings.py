"""A Binding (where the scheduler puts a pod): judged against the node and the cluster state, and recorded.

A binding is judged with what the cluster state holds of its pod, its node, the pod's PodGroup and
where that group's other members already are (``input.binding``); when the state cannot tell (a
pod or node not delivered yet, no cluster state at all), it is answered per server.failureMode
like an evaluation that failed: never allowed unjudged.

Its place in the decision log is the evidence of where a pod was put, and against what. The
scheduling compliance report (调度合规) is built from these records alone: per pod, the node, its
zone, the node labels and taints that were judged, the pod's PodGroup and owner, and the zones its
PodGroup's other members were already in. An auditor reads where sensitive work actually ran from
what was decided at the moment it was placed, not from a later look at the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .admission import AdmissionRequest
from .config import Config, PlacementSettings
from .contract import EngineInput
from .errors import EvaluationError
from .kind_handler import ClusterView, Judged, KindContext

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # the PodGroup Volcano's controllers put a pod in
VOLCANO_MADE_GROUP = "podgroup-"  # the PodGroup Volcano's controller makes for one bare pod: podgroup-<uid>


def binding_target(request: AdmissionRequest) -> str:
    """The node a Binding names (``target.name``); empty if it names none."""
    target = (request.object or {}).get("target")
    return str(target.get("name") or "") if isinstance(target, dict) else ""


def binding_context(request: AdmissionRequest, view: ClusterView, config: Config) -> KindContext:
    """What the view holds of the binding's pod, node and PodGroup (or why it cannot tell)."""
    return KindContext(binding=view.binding_context(request.namespace, request.name, binding_target(request),
                                                    config.placement.zone_label))


def judged_binding(request: AdmissionRequest, config: Config, context: KindContext) -> list[Judged]:
    """The request with ``input.binding``; EvaluationError when the cluster state cannot tell it."""
    binding = context.binding
    if not isinstance(binding, Mapping):
        reason = binding or "vgate judges bindings from the cluster state, and cluster.watch is off"
        raise EvaluationError(f"cannot judge this binding: {reason}")
    return [Judged("", dict(binding["pod"]), EngineInput.of({**request.review, "binding": dict(binding)}))]


def record_binding(request: AdmissionRequest, context: KindContext, config: Config) -> dict[str, Any]:
    """The ``binding`` field of a binding's decision record."""
    return {"binding": placement_record(request, context.binding, config.placement)}


def bound(request: AdmissionRequest, view: ClusterView) -> None:
    """An allowed binding: its PodGroup's next member sees it before the pod watch does."""
    view.note_bound(request.namespace, request.name, binding_target(request))


def placement_record(request: AdmissionRequest, context: Mapping[str, Any] | str | None,
                     placement: PlacementSettings) -> dict[str, Any]:
    """Where the pod was put and against what (``context``: what the cluster state gave the rules,
    or why it could give nothing)."""
    record: dict[str, Any] = {"pod": request.name, "node": binding_target(request)}
    if not isinstance(context, Mapping):
        record["unknown"] = context or "no cluster state (cluster.watch is off)"
        return record
    pod_metadata = context["pod"].get("metadata") or {}
    labels = pod_metadata.get("labels") or {}
    node_labels = (context["node"].get("metadata") or {}).get("labels") or {}
    judged_labels = (placement.zone_label, *placement.encrypted_node_labels)
    group = context.get("podGroup") or {}
    group_name = (pod_metadata.get("annotations") or {}).get(GROUP_ANNOTATION)
    owners = pod_metadata.get("ownerReferences") or (group.get("metadata") or {}).get("ownerReferences") or []
    if not owners and group_name and not group_name.startswith(VOLCANO_MADE_GROUP):
        owners = [{"kind": "PodGroup", "name": group_name}]  # pods gathered in a PodGroup of their own making
    record.update(
        sensitive=placement.is_sensitive(labels),
        zone=node_labels.get(placement.zone_label),
        zoneSetBy=((context["node"].get("metadata") or {}).get("labelManagers") or {}).get(placement.zone_label),
        nodeLabels={key: node_labels[key] for key in judged_labels if key in node_labels},
        taints=[f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                for t in (context["node"].get("spec") or {}).get("taints") or []],
        runtimeClassName=(context["pod"].get("spec") or {}).get("runtimeClassName"),
        podGroup=group_name,
        workload=f"{owners[0]['kind']}/{owners[0]['name']}" if owners else f"Pod/{request.name}",
        memberZones=sorted({str(member["zone"]) for member in context.get("members") or []}),
    )
    return record
