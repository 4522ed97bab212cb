"""Drift (webhook/core/drift.py): a node's placement facts changed under the sensitive pods already
running on it, and only those."""

from __future__ import annotations

import copy
from typing import Any

from webhook.core.drift import node_drift
from webhook.files.config_file import load_config

SEV = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
ZONE = "topology.kubernetes.io/zone"
PLACEMENT = load_config().placement
NODE = {"metadata": {"name": "sev-1", "labels": {ZONE: "zone-a", SEV: "true"}}, "spec": {"taints": []}}


def pod(name: str, sensitive: bool = True, node: str = "sev-1", **spec: Any) -> dict[str, Any]:
    labels = {"vgate.io/data-classification": "sensitive"} if sensitive else {"app": "web"}
    return {"metadata": {"name": name, "namespace": "ml-training", "labels": labels},
            "spec": {"nodeName": node, **spec}}


def changed(**labels: str | None) -> dict[str, Any]:
    after = copy.deepcopy(NODE)
    for key, value in labels.items():
        key = {"sev": SEV, "zone": ZONE}[key]
        if value is None:
            after["metadata"]["labels"].pop(key)
        else:
            after["metadata"]["labels"][key] = value
    return after


PODS = [pod("vault"), pod("web", sensitive=False), pod("elsewhere", node="sev-2"),
        pod("kata", runtimeClassName="kata-qemu-snp")]


def test_losing_memory_encryption_drifts_every_sensitive_pod_on_the_node_that_relies_on_it():
    found = node_drift(NODE, changed(sev=None), PODS, PLACEMENT, "dedicated")
    assert found == [{"pod": "ml-training/vault", "node": "sev-1", "changes": [
        {"what": "encryption", "change": f"lost its memory-encryption label {SEV}=true"}]}]
    # the ordinary pod, the pod on another node, and the pod encrypting its own memory are not drift


def test_a_zone_change_and_a_new_tenant_taint_drift_every_sensitive_pod_there():
    moved = node_drift(NODE, changed(zone="zone-b"), PODS, PLACEMENT, "dedicated")
    assert [d["pod"] for d in moved] == ["ml-training/kata", "ml-training/vault"]
    assert moved[0]["changes"] == [{"what": "zone", "change": "moved from zone 'zone-a' to 'zone-b'"}]
    tainted = copy.deepcopy(NODE)
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "finance", "effect": "NoSchedule"}]
    [first, _] = node_drift(NODE, tainted, PODS, PLACEMENT, "dedicated")
    assert first["changes"] == [{"what": "taint", "change": "took the tenant taint dedicated=finance:NoSchedule"}]


def test_changes_that_undo_nothing_are_no_drift():
    assert node_drift(NODE, changed(sev="true"), PODS, PLACEMENT, "dedicated") == []  # unchanged
    relabelled = changed()
    relabelled["metadata"]["labels"]["team"] = "x"
    assert node_drift(NODE, relabelled, PODS, PLACEMENT, "dedicated") == []
    gained = node_drift(changed(sev=None), NODE, PODS, PLACEMENT, "dedicated")  # encryption added: better
    assert gained == []
    other = copy.deepcopy(NODE)
    other["spec"]["taints"] = [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]
    assert node_drift(NODE, other, PODS, PLACEMENT, "dedicated") == []  # not a tenant taint
