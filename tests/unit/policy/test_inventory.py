"""Policies read the cluster state as ``data.inventory`` (Gatekeeper's shape), replaced when it
changes, in both of regorus's engines. The e2e test of the same is tests/e2e/test_cluster_state.py."""

from __future__ import annotations

import copy

import pytest

from webhook.core.contract import EngineInput
from webhook.policy.regorus_engine import RegorusEngine
from webhook.policy.sources import load_policy_set

from helpers import POLICIES, RESTRICTED_SPEC, review

QUEUE = "scheduling.volcano.sh/queue-name"


def unmutated_pod(namespace: str) -> dict:
    """A pod that names no queue (as /validate sees it when /mutate did not run) and may use 100Gi:
    over the inference queue's cap (64Gi); the batch queue has none."""
    spec = copy.deepcopy(RESTRICTED_SPEC)
    spec["containers"][0]["resources"] = {"limits": {"memory": "100Gi", "cpu": "1"},
                                          "requests": {"memory": "100Gi", "cpu": "1"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": namespace}, "spec": spec}


def namespaces(**queues: str) -> dict:
    return {"cluster": {"v1": {"Namespace": {name: {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "annotations": {QUEUE: queue}}} for name, queue in queues.items()}}}, "namespace": {}}


def denied_by(engine: RegorusEngine, interpreted: bool) -> set[str]:
    request = EngineInput.of(review(unmutated_pod("ml-inference")))
    result = engine.evaluate_interpreted(request) if interpreted else engine.evaluate(request).result
    return {outcome.rule for outcome in result.deny}


@pytest.mark.parametrize("interpreted", [False, True], ids=["rvm", "interpreter"])
def test_a_namespaces_queue_in_the_inventory_is_the_queue_rules_judge_by(config, interpreted):
    engine = RegorusEngine(load_policy_set(POLICIES), config.document)
    assert engine.name == "rvm"
    # the config maps ml-inference to inference, whose memory cap is 64Gi
    assert "resources-memory-limit-cap" in denied_by(engine, interpreted)
    engine.set_inventory(namespaces(**{"ml-inference": "batch"}))  # annotated: batch, no cap
    assert "resources-memory-limit-cap" not in denied_by(engine, interpreted)
    engine.set_inventory(namespaces())  # the annotation removed: the config's queue again
    assert "resources-memory-limit-cap" in denied_by(engine, interpreted)
