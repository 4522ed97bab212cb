"""The admission-kind registry (webhook/core/kinds.py) is the one place a kind is added: the chart's
webhook rules, the README's write-path table, the mutators and the classifier are held to it."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

import orjson
import pytest

from webhook.core.admission import decode_review
from webhook.core.contract import EngineInput, Evaluation, PolicyResult
from webhook.core.kind_handler import KindContext
from webhook.core.kinds import KINDS, POD_SUBRESOURCES, AdmissionKind, Workload, classify, entry_of
from webhook.core.mutation import mutate
from webhook.core.validation import validate
from webhook.files.config_file import load_config

from helpers import ROOT, review, trusted

sys.path.insert(0, str(ROOT / "deploy"))
from render import render

sys.path.insert(0, str(ROOT / "tests" / "core"))
from test_write_paths import table

NOW = datetime(2026, 12, 3, tzinfo=timezone.utc)


def registered(kind: str, webhook: str, values: dict | None = None) -> set[tuple[str, str, str, str]]:
    """(group, version, resource, operation) of every rule of one webhook of the chart's configuration."""
    [configuration] = [d for d in render(trusted(values or {})) if d["kind"] == kind]
    return {(group, version, resource, operation) for hook in configuration["webhooks"] if hook["name"] == webhook
            for rule in hook["rules"]
            for group in rule["apiGroups"] for version in rule["apiVersions"] for resource in rule["resources"]
            for operation in rule["operations"]}


def test_the_charts_webhooks_register_exactly_the_registrys_kinds():
    mutated = {(k.group, k.version, k.resource, "CREATE") for k in KINDS if k.mutated}
    assert registered("MutatingWebhookConfiguration", "mutate.vgate.io") == mutated
    webhooks = {k.webhook for k in KINDS}
    assert webhooks == {"validate.vgate.io", "bind.vgate.io", "nodes.vgate.io", "network.vgate.io"}
    for webhook in webhooks:
        judged = {(k.group, k.version, resource, op) for k in KINDS if k.webhook == webhook
                  for resource in filter(None, (k.resource, k.subresource)) for op in k.operations}
        if webhook == "validate.vgate.io":
            judged |= {("", "v1", f"pods/{sub}", "UPDATE") for sub in POD_SUBRESOURCES}
        assert registered("ValidatingWebhookConfiguration", webhook) == judged, webhook
    # Both ways to bind (the legacy bindings resource and pods/binding), by their own webhook
    assert registered("ValidatingWebhookConfiguration", "bind.vgate.io") == {
        ("", "v1", "bindings", "CREATE"), ("", "v1", "pods/binding", "CREATE")}


def test_the_break_glass_commands_find_their_webhooks_by_index():
    """docs/operators.md's break glass patches /webhooks/0/ (validation) and /webhooks/1/ (bindings) of
    the validating configuration: a webhook added later goes after them (nodes.vgate.io once shifted
    the binding webhook, and the e2e break-glass test failed)."""
    [configuration] = [d for d in render(trusted({})) if d["kind"] == "ValidatingWebhookConfiguration"]
    assert [hook["name"] for hook in configuration["webhooks"]] == ["validate.vgate.io", "bind.vgate.io",
                                                                   "nodes.vgate.io", "network.vgate.io"]


def test_the_binding_webhook_fails_closed_and_needs_the_cluster_state():
    [configuration] = [d for d in render(trusted({})) if d["kind"] == "ValidatingWebhookConfiguration"]
    [hook] = [h for h in configuration["webhooks"] if h["name"] == "bind.vgate.io"]
    assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["service"]["path"] == "/validate"
    assert registered("ValidatingWebhookConfiguration", "bind.vgate.io", {"clusterState": {"enabled": False}}) == set()


def row_label(kind: AdmissionKind) -> str:
    """How the README's write-path table names a kind's rows."""
    return {Workload.POD_CONTROLLER: "Deployment", Workload.VOLCANO_JOB: "Volcano Job"}.get(kind.workload, kind.kind)


def test_the_readme_write_paths_are_the_registrys():
    """Each thing the registry says an UPDATE may change has its README row, and each row its entry."""
    rows = table()
    for kind in KINDS:
        for field in kind.update_mutable:
            assert any(row_label(kind) in label and field in what for label, what, _ in rows), (kind.kind, field)
    for sub, judged in POD_SUBRESOURCES.items():
        assert any(f"pods/{sub}" in label and judged.judged_field in what for label, what, _ in rows), sub
    fields = {(row_label(kind), field) for kind in KINDS for field in kind.update_mutable}
    assert len(rows) == len(fields) + len(POD_SUBRESOURCES)


def test_only_kinds_with_a_mutator_are_patched():
    config = load_config()
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml-training"},
                  "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "registry.example.com/a:1"}]}}}}
    request = decode_review(orjson.dumps(review(deployment)), 64)
    assert classify(request) is Workload.POD_CONTROLLER and mutate(request, config).patch == []
    assert {k.kind for k in KINDS if k.mutated} == {"Pod", "Job", "PodGroup", "SparkApplication",
                                                    "ScheduledSparkApplication"}


def _containers(count: int) -> list[dict]:
    return [{"name": f"c{index}", "image": "registry.example.com/app:1"} for index in range(count)]


def _pod_spec(count: int) -> dict:
    return {"containers": _containers(count)}


def _spark_role(count: int) -> dict:
    return {"cores": 1, "memory": "1g", "sidecars": _containers(count - 1)}


def _spark_app(count: int) -> dict:
    return {"type": "Scala", "image": "registry.example.com/spark:4", "driver": _spark_role(count),
            "executor": {**_spark_role(count), "instances": 1}}


# An object of every registered kind, its every pod spec holding ``count`` containers: the registry's
# handler must find them all (a kind added without an example here fails the first test below).
EXAMPLES = {
    ("", "Pod"): lambda n: {"spec": _pod_spec(n)},
    ("batch.volcano.sh", "Job"): lambda n: {"spec": {"tasks": [{"name": "t", "replicas": 1,
                                                               "template": {"spec": _pod_spec(n)}}]}},
    ("scheduling.volcano.sh", "PodGroup"): None,
    **{(group, kind): (lambda n: {"spec": {"template": {"spec": _pod_spec(n)}}})
       for group, kind in (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
                           ("apps", "ReplicaSet"), ("", "ReplicationController"), ("batch", "Job"))},
    ("batch", "CronJob"): lambda n: {"spec": {"schedule": "@hourly", "jobTemplate": {"spec": {
        "template": {"spec": _pod_spec(n)}}}}},
    ("sparkoperator.k8s.io", "SparkApplication"): lambda n: {"spec": _spark_app(n)},
    ("sparkoperator.k8s.io", "ScheduledSparkApplication"): lambda n: {"spec": {"schedule": "@hourly",
                                                                               "template": _spark_app(n)}},
    ("", "Binding"): None,
    ("", "Node"): None,
    ("networking.k8s.io", "NetworkPolicy"): None,
    ("policy.networking.k8s.io", "AdminNetworkPolicy"): None,
    ("policy.networking.k8s.io", "BaselineAdminNetworkPolicy"): None,
    ("", "Namespace"): None,
    ("", "Service"): None,
    ("networking.k8s.io", "Ingress"): None,
}


def example(kind: AdmissionKind, containers: int) -> dict:
    build = EXAMPLES[(kind.group, kind.kind)]
    body = build(containers) if build else {"spec": {}}
    return {"apiVersion": f"{kind.group}/{kind.version}" if kind.group else kind.version, "kind": kind.kind,
            "metadata": {"name": "x", "namespace": "ml-training"}, **body}


class Recording:
    """An engine that allows everything and keeps what it was asked."""

    revision, name = "test", "rvm"

    def __init__(self) -> None:
        self.asked: list[EngineInput] = []

    def evaluate(self, request: EngineInput) -> Evaluation:
        self.asked.append(request)
        return Evaluation(PolicyResult((), ()), "rvm")


def test_every_registered_kind_has_an_example_of_its_pods():
    assert set(EXAMPLES) == {(k.group, k.kind) for k in KINDS}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.group or 'core'}/{k.kind}")
def test_every_kinds_handler_finds_every_pod_spec_and_bounds_it(kind):
    """The size limit holds for every pod spec of every kind, by construction: a SparkApplication with
    257 containers on its driver passed (its handler-less branch counted none)."""
    config = load_config()
    most = config.server.max_containers_per_pod
    specs = kind.handler.pod_specs(example(kind, 2))
    if EXAMPLES[(kind.group, kind.kind)] is None:
        assert specs == []
        return
    assert specs and all(sum(len(spec.get(f) or []) for f in ("initContainers", "containers")) == 2
                         for _, spec in specs), specs
    request = decode_review(orjson.dumps(review(example(kind, most + 1))), 64)
    refused = validate(request, Recording(), config, (), NOW)
    assert not refused.decision.allowed and refused.decision.audit_annotations == {"refused": "too-large"}
    assert f"has {most + 1} containers" in refused.decision.message
    assert mutate(request, config).patch == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.group or 'core'}/{k.kind}")
def test_every_kinds_handler_says_what_the_engine_evaluates(kind):
    """No kind falls through to another's behaviour: each is judged as its handler says."""
    config = load_config()
    request = decode_review(orjson.dumps(review(example(kind, 1))), 64)
    engine = Recording()
    context = KindContext(binding={"pod": {"metadata": {"name": "x"}}, "node": {"metadata": {"name": "n"}}})
    result = validate(request, engine, config, (), NOW, context)
    assert result.error is None and result.decision.allowed, result.decision.message
    kinds = [asked.document["request"]["kind"]["kind"] for asked in engine.asked]
    expected = {Workload.POD_CONTROLLER: ["Pod"], Workload.SPARK_APPLICATION: ["Pod", "Pod"]}
    assert kinds == expected.get(kind.workload, [kind.kind])
    if kind.workload is Workload.BINDING:
        assert engine.asked[0].document["binding"]["node"]["metadata"]["name"] == "n"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.group or 'core'}/{k.kind}")
def test_every_registered_kind_is_classified_as_its_entry_says(kind):
    obj = {"apiVersion": f"{kind.group}/{kind.version}" if kind.group else kind.version, "kind": kind.kind,
           "metadata": {"name": "x", "namespace": "web"}, "spec": {}}
    request = decode_review(orjson.dumps(review(obj)), 64)
    assert classify(request) is kind.workload and entry_of(request) is kind
