"""Drift: a node's placement facts changed under the sensitive pods already bound to it.

A binding is judged against the node as it is at that moment; an admin may change the node
afterwards (the node-facts rule lets admins, not nodes, do so). When a Node UPDATE removes the last
memory-encryption label, changes the zone, or adds or changes a tenant taint, every sensitive pod
already running there no longer stands where its binding put it. The write is allowed (the admin's
to make), and its decision record carries ``drift``: each such pod, what changed, and the user who
changed it, so it is counted, alerted on and listed in the next report. Pure: the node before and
after, and the pods of the cluster view, are given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .admission import AdmissionRequest
from .config import Config, PlacementSettings
from .egress import NetworkObjects
from .kind_handler import KindContext
from .workloads import labels_of


def node_drift(before: Mapping[str, Any], after: Mapping[str, Any], pods: Iterable[Mapping[str, Any]],
               placement: PlacementSettings, taint_key: str) -> list[dict[str, Any]]:
    """The sensitive pods on this node whose placement the change undoes, each with what changed."""
    changes = _changes(before, after, placement, taint_key)
    if not changes:
        return []
    node = str((after.get("metadata") or {}).get("name") or "")
    found = []
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node or not placement.is_sensitive(labels_of(pod)):
            continue
        confidential = spec.get("runtimeClassName") in placement.confidential_runtime_classes  # its own memory
        relevant = [{"what": what, "change": change} for what, change in changes
                    if what != "encryption" or not confidential]
        if relevant:
            metadata = pod.get("metadata") or {}
            found.append({"pod": f"{metadata.get('namespace')}/{metadata.get('name')}", "node": node,
                          "changes": relevant})
    return sorted(found, key=lambda item: str(item["pod"]))


def _changes(before: Mapping[str, Any], after: Mapping[str, Any], placement: PlacementSettings,
             taint_key: str) -> list[tuple[str, str]]:
    old, new = labels_of(before), labels_of(after)
    found = []
    encrypted_before = [key for key in placement.encrypted_node_labels if old.get(key) == "true"]
    if encrypted_before and not any(new.get(key) == "true" for key in placement.encrypted_node_labels):
        found.append(("encryption", f"lost its memory-encryption label {encrypted_before[0]}=true"))
    zone = placement.zone_label
    if old.get(zone) != new.get(zone):
        found.append(("zone", f"moved from zone {old.get(zone)!r} to {new.get(zone)!r}"))
    taints_before, taints_after = _taints(before, taint_key), _taints(after, taint_key)
    if taints_after - taints_before:
        found.append(("taint", f"took the tenant taint {', '.join(sorted(taints_after - taints_before))}"))
    return found


def _taints(node: Mapping[str, Any], key: str) -> set[str]:
    return {f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in (node.get("spec") or {}).get("taints")
            or [] if isinstance(t, Mapping) and t.get("key") == key}


def record_node_drift(request: AdmissionRequest, context: KindContext, config: Config) -> dict[str, Any]:
    """A Node UPDATE's record: ``drift`` when it undoes the placement of sensitive pods on the node
    (from the cluster view's pods; nothing without one)."""
    if request.operation != "UPDATE" or request.object is None or not isinstance(context.network, NetworkObjects):
        return {}
    found = node_drift(request.old_object or {}, request.object, context.network.pods, config.placement,
                       config.dedicated_taint_key)
    return {"drift": found} if found else {}
