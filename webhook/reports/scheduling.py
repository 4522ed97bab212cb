"""The report's scheduling compliance section (调度合规): where sensitive work actually ran.

Built from the binding decisions of the hour alone (``core.bindings`` writes their ``binding``
field, ``core.egress_judge`` their ``egress``): per sensitive workload (its owner, or the pod
itself), every pod bound, the node and zone it went to, the constraints verified at that binding
(the three of the mission: one zone, and who last set the node's zone label; memory encryption; no
external network, with the NetworkPolicies that confine the pod; and its PodGroup's zones, the
node's tenant taints), and every binding refused, with the rules' reasons. A workload is compliant
when its pods placed are in one zone and each binding was judged confined: a binding recorded
without egress evidence (vgate before effective egress) does not count as confined. Ordinary pods'
bindings are counted, not listed. Memory stays bounded by the hour's sensitive pods: a pod refused
again every scheduling cycle keeps its first ``REFUSALS_LISTED`` refusals and a count of the rest.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

REFUSALS_LISTED = 20
CONTROLS = (  # what this section is evidence of
    "MLPS 2.0 (GB/T 22239-2019) 8.1.3.1 boundary protection",  # no way out of the cluster's boundary
    "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control",   # placed only where the pod may run
    "MLPS 2.0 (GB/T 22239-2019) 8.1.4.8 data confidentiality",  # on memory-encrypted nodes
    "MLPS 2.0 (GB/T 22239-2019) 8.1.4.3 security audit",   # every binding recorded
)


class SchedulingTally:
    """The bindings of one hour, as the records stream by (``add``), and the section they make."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.workloads: dict[tuple[str, str], dict[str, Any]] = {}
        self.drift: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        self._add_drift(record)
        binding = record.get("binding")
        if record.get("endpoint") != "validate" or not isinstance(binding, dict) or record.get("dryRun"):
            return
        allowed = bool(record.get("allowed"))
        unknown = "unknown" in binding
        self.counts["bound" if allowed else "refused"] += 1
        if unknown:
            self.counts["unjudged"] += 1  # pod or node not known yet: answered by server.failureMode
        if not binding.get("sensitive") and not unknown:
            return
        if binding.get("sensitive"):
            self.counts["sensitiveBound" if allowed else "sensitiveRefused"] += 1
        namespace, pod = str(record.get("namespace") or ""), str(binding.get("pod") or record.get("name") or "")
        workload = self.workloads.setdefault((namespace, str(binding.get("workload") or f"Pod/{pod}")), {
            "namespace": namespace, "workload": binding.get("workload") or f"Pod/{pod}",
            "podGroup": binding.get("podGroup"), "pods": {}})
        entry = workload["pods"].setdefault(pod, {"pod": pod, "node": None, "zone": None, "boundAt": None,
                                                  "verified": None, "refused": [], "refusedMore": 0})
        if allowed:
            entry.update(node=binding.get("node"), zone=binding.get("zone"), boundAt=record.get("time"),
                         verified=_verified(binding, _egress_of(record, namespace, pod)),
                         policyRevision=record.get("policyRevision"))
        elif len(entry["refused"]) < REFUSALS_LISTED:
            entry["refused"].append({"time": record.get("time"), "node": binding.get("node"),
                                     "zone": binding.get("zone"), "reasons": _reasons(record)})
        else:
            entry["refusedMore"] += 1

    def _add_drift(self, record: dict[str, Any]) -> None:
        """An allowed node change under running sensitive pods (``core.drift``): listed with when it
        happened and who made it; memory bounded like refusals."""
        drifted = record.get("drift")
        if not isinstance(drifted, list) or record.get("dryRun") or not record.get("allowed"):
            return
        for item in drifted:
            if isinstance(item, dict) and len(self.drift) < REFUSALS_LISTED * 10:
                self.drift.append({"time": record.get("time"), "user": record.get("user"), "pod": item.get("pod"),
                                   "node": item.get("node"), "changes": [str(c.get("change")) for c in
                                                                         item.get("changes") or []]})
            self.counts["drift"] += 1

    def section(self) -> dict[str, Any]:
        workloads = []
        for (namespace, name), workload in sorted(self.workloads.items()):
            pods = [workload["pods"][pod] for pod in sorted(workload["pods"])]
            zones = sorted({str(p["zone"]) for p in pods if p["node"]})
            placed = [p for p in pods if p["node"]]
            workloads.append({
                "namespace": namespace, "workload": name, "podGroup": workload["podGroup"], "zones": zones,
                "pods": pods, "placed": len(placed),
                "refusals": sum(len(p["refused"]) + p["refusedMore"] for p in pods),
                # one zone, and every pod placed was placed on a binding vgate judged, allowed and
                # found confined
                "compliant": len(zones) <= 1 and all(p["verified"] and (p["verified"]["egress"] or {}).get("confined")
                                                     for p in placed),
            })
        return {"controls": list(CONTROLS), "bindings": {key: self.counts.get(key, 0) for key in (
            "bound", "refused", "unjudged", "sensitiveBound", "sensitiveRefused")}, "sensitiveWorkloads": workloads,
            "drift": self.drift, "driftCount": self.counts.get("drift", 0)}


def _egress_of(record: dict[str, Any], namespace: str, pod: str) -> dict[str, Any] | None:
    """The pod's effective egress as its binding was judged with it; None if the record has none."""
    for found in (record.get("egress") or {}).get("pods") or []:
        if isinstance(found, dict) and found.get("pod") == f"{namespace}/{pod}":
            return {"confined": found.get("confined") is True, "policies": list(found.get("policies") or []),
                    "reasons": list(found.get("reasons") or [])}
    return None


def _verified(binding: dict[str, Any], egress: dict[str, Any] | None) -> dict[str, Any]:
    """The constraints a binding that was allowed was held to, as the record says the node was."""
    labels = binding.get("nodeLabels") or {}  # the zone label and the encryption labels the node has
    encryption = [f"{key}={value}" for key, value in labels.items() if value == "true"]
    if binding.get("runtimeClassName"):
        encryption.append(f"runtimeClassName={binding['runtimeClassName']}")
    return {"zone": binding.get("zone"), "zoneSetBy": binding.get("zoneSetBy"), "memoryEncryption": encryption,
            "egress": egress,
            "podGroupZones": sorted({*binding.get("memberZones", []), str(binding.get("zone"))}),
            "nodeTaints": binding.get("taints") or []}


def _reasons(record: dict[str, Any]) -> list[str]:
    reasons = [str(r.get("message")) for r in record.get("rules") or [] if r.get("action") == "deny"]
    return reasons or [str(record.get("message") or record.get("error") or "refused")]
