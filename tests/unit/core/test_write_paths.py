"""The README's table of write paths, walked: each UPDATE it lists is judged by the rule it names.

For every row, an UPDATE (or subresource write) that changes only that field to a forbidden value
goes through vgate's validation with the shipped policies and config, and must be denied by that
rule; the same UPDATE changing nothing is allowed. A row added to the README without a case here
fails the test, and so does a case whose rule stops judging it.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime, timezone
from typing import Any

import orjson
import pytest

from webhook.core.admission import decode_review
from webhook.core.validation import validate

from helpers import RESTRICTED_SPEC, ROOT, review

NOW = datetime(2026, 12, 3, tzinfo=timezone.utc)
GUARANTEED = {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}


def table() -> list[tuple[str, str, str]]:
    operators = (ROOT / "docs" / "operators.md").read_text()
    section = operators.split("<!-- write-paths -->")[1].split("<!-- /write-paths -->")[0]
    rows = [line.strip().strip("|").split(" | ") for line in section.strip().splitlines()[2:]]
    return [(kind.strip(), field.strip(), rule.strip()) for kind, field, rule in rows]


def running_pod() -> dict[str, Any]:
    """A pod in ml-training as /mutate left it, bound and running."""
    spec = {**copy.deepcopy(RESTRICTED_SPEC), "schedulerName": "volcano", "nodeName": "node-1",
            "priorityClassName": "vgate-high", "priority": 100000}
    spec["containers"][0]["resources"] = copy.deepcopy(GUARANTEED)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "ml-training", "annotations": {"scheduling.volcano.sh/queue-name": "training"}},
        "spec": spec}


def sensitive_pod() -> dict[str, Any]:
    """A running sensitive pod: its images must stay pinned (the shipped config allows any registry)."""
    obj = running_pod()
    obj["metadata"]["labels"] = {"vgate.io/data-classification": "sensitive"}
    obj["spec"]["containers"][0]["image"] = "registry.example.com/app@sha256:" + "9f86d081" * 8
    return obj


def volcano_object(kind: str) -> dict[str, Any]:
    if kind == "PodGroup":
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "ml-training"}, "spec": {"queue": "training", "minMember": 1}}
    task = {"name": "t", "replicas": 1, "template": {"spec": copy.deepcopy(RESTRICTED_SPEC)}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ml-training"},
            "spec": {"queue": "training", "minAvailable": 1, "schedulerName": "volcano",
                     "priorityClassName": "vgate-high", "tasks": [task]}}


def deployment() -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "w"}}, "spec": copy.deepcopy(RESTRICTED_SPEC)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "ml-training"},
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template}}


def spark_application(kind: str = "SparkApplication") -> dict[str, Any]:
    """An application whose driver and executor pass every rule in ml-training's training queue."""
    role = {"cores": 1, "coreLimit": "1", "memory": "2g",
            "securityContext": RESTRICTED_SPEC["containers"][0]["securityContext"],
            "podSecurityContext": RESTRICTED_SPEC["securityContext"]}
    app = {"type": "Scala", "sparkVersion": "4.0.1", "mainApplicationFile": "local:///opt/app.jar",
           "image": "registry.example.com/spark:4.0.1", "batchScheduler": "volcano",
           "batchSchedulerOptions": {"queue": "training", "priorityClassName": "vgate-high"},
           "driver": copy.deepcopy(role), "executor": {**copy.deepcopy(role), "instances": 2}}
    spec = {"schedule": "@hourly", "template": app} if kind == "ScheduledSparkApplication" else app
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": kind,
            "metadata": {"name": "etl", "namespace": "ml-training"}, "spec": spec}


def _driver(obj: dict[str, Any]) -> None:
    app = obj["spec"].get("template", obj["spec"])
    app["driver"]["securityContext"] = {"privileged": True}


def _image(obj: dict[str, Any]) -> None:
    obj["spec"]["containers"][0]["image"] = "docker.io/attacker/miner:1"


def _toleration(obj: dict[str, Any]) -> None:
    obj["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "serving", "effect": "NoSchedule"}]


def _pod_queue(obj: dict[str, Any]) -> None:
    obj["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "inference"


def _debug(obj: dict[str, Any]) -> None:
    obj["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "registry.example.com/busybox:1",
                                           "securityContext": {"privileged": True}}]


def _resize(obj: dict[str, Any]) -> None:
    obj["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Ti"},
                                                 "requests": {"cpu": "1", "memory": "1Ti"}}


def _unclassified(obj: dict[str, Any]) -> None:
    del obj["metadata"]["labels"]["vgate.io/data-classification"]


def _spec_queue(obj: dict[str, Any]) -> None:
    obj["spec"]["queue"] = "inference"


def _template(obj: dict[str, Any]) -> None:
    obj["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}


# (the table's kind column, its field column) -> (object, change, subresource, rule the case checks)
CASES = {
    "a container's `image`": (sensitive_pod, _image, "", "supply-chain-image-registry"),
    "`tolerations`": (running_pod, _toleration, "", "placement-foreign-taint-toleration"),
    "the `scheduling.volcano.sh/queue-name` annotation": (running_pod, _pod_queue, "", "scheduling-queue-allowed"),
    "the `vgate.io/data-classification` and `vgate.io/egress` labels": (sensitive_pod, _unclassified, "",
                                                                     "placement-classification-fixed"),
    "`ephemeralContainers`": (running_pod, _debug, "ephemeralcontainers", "security-privileged-container"),
    "a container's `resources`": (running_pod, _resize, "resize", "resources-memory-limit-cap"),
    "PodGroup `spec.queue`": (lambda: volcano_object("PodGroup"), _spec_queue, "", "scheduling-queue-allowed"),
    "Volcano Job `spec.queue`": (lambda: volcano_object("Job"), _spec_queue, "", "scheduling-queue-allowed"),
    "the pod template": (deployment, _template, "", "security-privileged-container"),
    "`spec.driver`, `spec.executor` and the rest of the spec": (spark_application, _driver, "",
                                                               "security-privileged-container"),
    "`spec.template`": (lambda: spark_application("ScheduledSparkApplication"), _driver, "",
                        "security-privileged-container"),
}


def case_for(kind: str, field: str) -> tuple[Any, ...]:
    for key, case in CASES.items():
        if key == field.split(" (")[0] or key == f"{kind} {field.split(' (')[0]}":
            return case
    raise AssertionError(f"the README lists {kind}: {field}, and no case here walks it")


@pytest.mark.parametrize(("kind", "field", "rule"), table(), ids=lambda value: value[:40])
def test_each_write_path_is_judged_by_the_rule_the_table_names(kind, field, rule, engine, config):
    make, change, subresource, checked = case_for(kind, field)
    assert checked in rule, (rule, checked)
    before = make()
    after = copy.deepcopy(before)
    change(after)

    def judged(obj: dict[str, Any]) -> Any:
        body = review(obj, operation="UPDATE", old_object=before)
        if subresource:
            body["request"]["subResource"] = subresource
        return validate(decode_review(orjson.dumps(body), 100), engine, config, (), NOW)

    denied = judged(after)
    assert checked in {o.rule for o in denied.rules("deny")}, (kind, field, denied.decision.message)
    unchanged = judged(copy.deepcopy(before))
    assert checked not in {o.rule for o in unchanged.rules("deny")}, (kind, field, unchanged.decision.message)


def test_the_table_has_a_row_for_every_case():
    fields = {field.split(" (")[0] for _, field, _ in table()} | {f"{k} {f.split(' (')[0]}" for k, f, _ in table()}
    assert set(CASES) <= fields, set(CASES) - fields
    assert re.search(r"\| Pod \(`pods/resize`\) \|", (ROOT / "docs" / "operators.md").read_text())
