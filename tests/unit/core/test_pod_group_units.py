"""A PodGroup of its users' making is one placement unit: its sensitive members are pinned to the zone
it fixes at its creation (webhook/core/handlers.py, _group_zone), judged through the server's path
(context from a cluster state, validate with the shipped policies). Issue 34: two members pinned to
different zones, bound at the same moment, were both allowed; judged against the PodGroup's own
immutable zone, no interleaving of creates or bindings can place them apart."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import orjson

from webhook.cluster.state import ClusterState
from webhook.core.admission import decode_review
from webhook.core.kinds import context_of
from webhook.core.validation import Validation, validate

from helpers import RESTRICTED_SPEC, review

NOW = datetime(2026, 12, 4, tzinfo=timezone.utc)
ZONE = "topology.kubernetes.io/zone"
SEV = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}


def group(name: str, labels: dict[str, str] | None = None, owner: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml-training", "labels": labels or {}}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": owner, "name": "j",
                                        "uid": "u"}]
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": metadata,
            "spec": {"minMember": 2}}


def member(zone: str, group_name: str = "gang", labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec = {**copy.deepcopy(RESTRICTED_SPEC), "schedulerName": "volcano", "nodeSelector": {ZONE: zone, SEV: "true"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "m", "namespace": "ml-training", "labels": SENSITIVE if labels is None else labels,
        "annotations": {"scheduling.k8s.io/group-name": group_name}}, "spec": spec}


def judged(pod: dict[str, Any], *objects: dict[str, Any]) -> Validation:
    from webhook.files.config_file import load_config
    from webhook.policy.regorus_engine import RegorusEngine
    from webhook.policy.sources import load_policy_set

    from helpers import POLICIES

    config = load_config()
    request = decode_review(orjson.dumps(review(pod)), 100)
    view = ClusterState.of_objects(objects)
    return validate(request, RegorusEngine(load_policy_set(POLICIES), config.document), config, (), NOW,
                    context=context_of(request, view, config))


def test_a_sensitive_member_is_pinned_to_the_zone_its_pod_group_fixes():
    fixed = group("gang", {ZONE: "zone-a"})
    elsewhere = judged(member("zone-b"), fixed).decision
    assert not elsewhere.allowed and elsewhere.audit_annotations == {"refused": "spark-spec"}
    assert "topology.kubernetes.io/zone=zone-b where its PodGroup gang is fixed to " \
           "topology.kubernetes.io/zone=zone-a" in elsewhere.message
    assert "PodGroup" not in judged(member("zone-a"), fixed).decision.message


def test_a_pod_group_fixing_no_zone_takes_no_sensitive_member_and_an_unseen_one_follows_the_failure_mode():
    refused = judged(member("zone-a"), group("gang")).decision
    assert "its PodGroup gang fixes no zone: label the PodGroup topology.kubernetes.io/zone=<zone>" in refused.message
    unseen = judged(member("zone-a"))
    assert unseen.error and "its PodGroup ml-training/gang is not in vgate's cluster state" in unseen.error


def test_jobs_and_ordinary_pods_and_volcanos_own_groups_are_not_asked():
    assert "PodGroup" not in judged(member("zone-b"), group("gang", owner="Job")).decision.message  # the Job's tasks
    assert "PodGroup" not in judged(member("zone-b", labels={"app": "web"}), group("gang")).decision.message
    assert "PodGroup" not in judged(member("zone-b", "podgroup-1234")).decision.message  # one bare pod
