"""The admission-kind registry (webhook/core/kinds.py) is the one place a kind is added: the chart's
webhook rules, the README's write-path table, the mutators and the classifier are held to it."""

from __future__ import annotations

import sys

import orjson
import pytest

from webhook.core.admission import decode_review
from webhook.core.kinds import KINDS, POD_SUBRESOURCES, AdmissionKind, Workload
from webhook.core.mutation import _MUTATORS, mutate
from webhook.core.workloads import MUTATED, classify
from webhook.files.config_file import load_config

from helpers import ROOT, review, trusted

sys.path.insert(0, str(ROOT / "deploy"))
from render import render

sys.path.insert(0, str(ROOT / "tests" / "core"))
from test_write_paths import table


def registered(kind: str, webhook: str, values: dict | None = None) -> set[tuple[str, str, str, str]]:
    """(group, version, resource, operation) of every rule of one webhook of the chart's configuration."""
    [configuration] = [d for d in render(trusted(values or {})) if d["kind"] == kind]
    return {(group, version, resource, operation) for hook in configuration["webhooks"] if hook["name"] == webhook
            for rule in hook["rules"]
            for group in rule["apiGroups"] for version in rule["apiVersions"] for resource in rule["resources"]
            for operation in rule["operations"]}


def test_the_charts_webhooks_register_exactly_the_registrys_kinds():
    mutated = {(k.group, k.version, k.resource, "CREATE") for k in KINDS if k.mutated}
    judged = {(k.group, k.version, k.resource, op) for k in KINDS for op in k.operations
              if k.workload is not Workload.BINDING}
    judged |= {("", "v1", f"pods/{sub}", "UPDATE") for sub in POD_SUBRESOURCES}
    bindings = {(k.group, k.version, resource, op) for k in KINDS if k.workload is Workload.BINDING
                for resource in (k.resource, k.subresource) for op in k.operations}
    assert registered("MutatingWebhookConfiguration", "mutate.vgate.io") == mutated
    assert registered("ValidatingWebhookConfiguration", "validate.vgate.io") == judged
    # Both ways to bind (the legacy bindings resource and pods/binding), by their own webhook
    assert registered("ValidatingWebhookConfiguration", "bind.vgate.io") == bindings == {
        ("", "v1", "bindings", "CREATE"), ("", "v1", "pods/binding", "CREATE")}


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
    for sub, (_, field) in POD_SUBRESOURCES.items():
        assert any(f"pods/{sub}" in label and field in what for label, what, _ in rows), sub
    fields = {(row_label(kind), field) for kind in KINDS for field in kind.update_mutable}
    assert len(rows) == len(fields) + len(POD_SUBRESOURCES)


def test_only_kinds_marked_mutated_are_patched_and_each_has_its_mutator():
    assert set(_MUTATORS) == set(MUTATED) == {k.workload for k in KINDS if k.mutated}
    config = load_config()
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml-training"},
                  "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "registry.example.com/a:1"}]}}}}
    request = decode_review(orjson.dumps(review(deployment)), 64)
    assert classify(request) is Workload.POD_CONTROLLER and mutate(request, config).patch == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.group or 'core'}/{k.kind}")
def test_every_registered_kind_is_classified_as_its_entry_says(kind):
    obj = {"apiVersion": f"{kind.group}/{kind.version}" if kind.group else kind.version, "kind": kind.kind,
           "metadata": {"name": "x", "namespace": "web"}, "spec": {}}
    request = decode_review(orjson.dumps(review(obj)), 64)
    assert classify(request) is kind.workload
