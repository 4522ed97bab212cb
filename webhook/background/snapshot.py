"""Where every sensitive workload runs now, and on what: the state an hourly report certifies.

The report's other sections come from the hour's decisions; a job placed on Monday and running on
Wednesday is in none of Wednesday's. The snapshot is taken from the cluster as listed (``scan``'s
lists): for every sensitive pod on a node and not finished, grouped by its workload (its owner, or
its PodGroup, or itself), the node and zone it runs on, the node's facts at that moment (zone and
who last set it, memory-encryption labels, the pod's confidential runtime class, taints), and its
effective egress where vgate computes it (confined or not, why, the confining policies); plus
every object the current policies refuse (the scan's denials). A workload is compliant when its
pods run in one zone, each on memory-encrypted hardware, each confined.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ..cluster.state import ClusterState, label_managers
from ..core.bindings import GROUP_ANNOTATION
from ..core.config import Config
from ..core.egress import NetworkObjects
from ..core.egress_judge import pod_egress
from ..core.workloads import annotations_of, labels_of
from .scan import Scan

VIOLATIONS_LISTED = 1000  # a report is read by people: the rest are counted


def take_snapshot(objects: Iterable[dict[str, Any]], scan: Scan | None, config: Config,
                  now: datetime) -> dict[str, Any]:
    """The ``snapshot`` section from the cluster's listed objects (and the scan of the same lists)."""
    listed = list(objects)
    placement = config.placement
    nodes = {_name(o): o for o in listed if o.get("kind") == "Node"}
    network = ClusterState.of_objects(listed).network()
    workloads: dict[tuple[str, str], dict[str, Any]] = {}
    for pod in listed:
        spec = pod.get("spec") or {}
        if pod.get("kind") != "Pod" or not spec.get("nodeName") or not placement.is_sensitive(labels_of(pod)) or \
                (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        group = annotations_of(pod).get(GROUP_ANNOTATION)
        workload = workloads.setdefault((namespace, _workload_of(pod)), {
            "namespace": namespace, "workload": _workload_of(pod), "podGroup": group, "pods": []})
        node = nodes.get(str(spec["nodeName"])) or {}
        workload["pods"].append({
            "pod": _name(pod), "node": spec["nodeName"], "nodeFacts": _facts(node, spec, config),
            "egress": pod_egress(pod, network, placement) if isinstance(network, NetworkObjects) else None})
    listed_workloads = [_judged(w) for _, w in sorted(workloads.items())]
    denied = [f for f in (scan.findings if scan else []) if not f.allowed]
    return {"taken": True, "takenAt": now.isoformat(timespec="seconds"), "sensitiveWorkloads": listed_workloads,
            "violations": [{"kind": f.kind, "namespace": f.namespace or None, "name": f.name,
                            "reasons": [str(v["message"]) for v in f.violations if v["action"] == "deny"]
                            or [f.message or f.error or "refused"]} for f in denied[:VIOLATIONS_LISTED]],
            "violationCount": len(denied), "objectsJudged": len(scan.findings) if scan else 0}


def not_taken(reason: str) -> dict[str, Any]:
    """What the report says when there is no snapshot: why, never an empty list that looks like none."""
    return {"taken": False, "reason": reason}


def _facts(node: dict[str, Any], spec: dict[str, Any], config: Config) -> dict[str, Any]:
    placement = config.placement
    labels = labels_of(node)
    return {"known": bool(node), "zone": labels.get(placement.zone_label),
            "zoneSetBy": label_managers(node).get(placement.zone_label),
            "memoryEncryption": [f"{key}=true" for key in placement.encrypted_node_labels if labels.get(key) == "true"]
            + ([f"runtimeClassName={spec['runtimeClassName']}"] if spec.get("runtimeClassName")
               in placement.confidential_runtime_classes else []),
            "taints": [f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                       for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]}


def _judged(workload: dict[str, Any]) -> dict[str, Any]:
    pods = workload["pods"]
    zones = sorted({str(p["nodeFacts"]["zone"]) for p in pods})
    compliant = len(zones) == 1 and all(p["nodeFacts"]["memoryEncryption"] and p["egress"] is not None
                                        and p["egress"]["confined"] for p in pods)
    return {**workload, "zones": zones, "compliant": compliant}


def _workload_of(pod: dict[str, Any]) -> str:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if owners and isinstance(owners[0], dict):
        return f"{owners[0].get('kind')}/{owners[0].get('name')}"
    group = annotations_of(pod).get(GROUP_ANNOTATION)
    return f"PodGroup/{group}" if group else f"Pod/{_name(pod)}"


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
