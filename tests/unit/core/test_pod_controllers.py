"""Pod controllers and kubectl debug: the two paths that used to reach a cluster unjudged."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from typing import Any

import orjson
import pytest

from webhook.core.admission import decode_review
from webhook.core.mutation import mutate
from webhook.core.validation import validate

from helpers import corpus_documents, corpus_file, pod, review

NOW = datetime(2026, 12, 3, tzinfo=timezone.utc)
PRIVILEGED = {"name": "app", "image": "registry.example.com/app:1", "securityContext": {"privileged": True}}


def controller(kind: str, spec: dict[str, Any], name: str = "web", namespace: str = "web") -> dict[str, Any]:
    """A controller of ``kind`` whose pod template has ``spec``."""
    template = {"metadata": {"labels": {"app": name}}, "spec": spec}
    api_version = {"ReplicationController": "v1", "Job": "batch/v1", "CronJob": "batch/v1"}.get(kind, "apps/v1")
    body: dict[str, Any] = {"template": template}
    if kind == "CronJob":
        body = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": body}


def judge(obj: dict[str, Any], engine, config, **options: Any):
    body = orjson.dumps(review(obj, **options))
    return validate(decode_review(body, 100), engine, config, (), NOW)


CONTROLLERS = ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job", "CronJob"]


@pytest.mark.parametrize("kind", CONTROLLERS)
def test_a_controller_whose_pods_would_be_denied_is_denied_naming_it(kind, engine, config):
    result = judge(controller(kind, {"containers": [PRIVILEGED]}), engine, config)
    assert not result.decision.allowed
    assert {o.rule for o in result.rules("deny")} == {"security-privileged-container"}
    assert (f'[security-privileged-container] {kind} web: privileged (container "app" must not set '
            "securityContext.privileged=true)") in result.decision.message


@pytest.mark.parametrize("kind", CONTROLLERS)
def test_a_controller_whose_pods_would_be_admitted_is_admitted(kind, engine, config):
    result = judge(controller(kind, {"containers": [{"name": "app", "image": "registry.example.com/app:1"}]}),
                   engine, config)
    assert result.decision.allowed and not result.rules("deny")


def test_the_template_is_judged_as_vgate_will_mutate_its_pods(engine, config):
    """In ml-training (Guaranteed queue) vgate injects memory limits: a template without them is fine."""
    spec = {"containers": [{"name": "app", "image": "registry.example.com/app:1"}]}
    result = judge(controller("Deployment", spec, namespace="ml-training"), engine, config)
    assert result.decision.allowed, result.decision.message
    in_training = {"scheduling.volcano.sh/queue-name": "training"}
    unmutated = judge(pod(namespace="ml-training", annotations=in_training, **copy.deepcopy(spec)), engine, config)
    assert "resources-memory-limits-required" in {o.rule for o in unmutated.rules("deny")}


def test_the_corpus_deployment_is_denied_for_the_queue_its_pods_would_be_denied_for(engine, config):
    deployment = corpus_documents("volcano-examples", "deployment_deployment.yaml")[0]
    result = judge(deployment, engine, config, namespace="ml-training")
    assert [o.rule for o in result.rules("deny")] == ["scheduling-queue-allowed"]
    assert 'Deployment deploy-with-volcano: Pod names Volcano queue "test"' in result.decision.message


def test_kubernetes_every_field_deployment_is_judged(engine, config):
    deployment = json.loads(corpus_file("kubernetes-api-testdata", "apps.v1.Deployment.json").read_text())
    result = judge(deployment, engine, config, namespace="web")
    assert not result.decision.allowed
    assert result.decision.message.startswith("vgate denied Deployment web/nameValue: ")
    assert all(o.message.startswith("Deployment nameValue: ") for o in result.outcomes)


def test_an_update_that_keeps_the_template_is_not_judged_one_that_changes_it_is(engine, config):
    old = controller("Deployment", {"containers": [PRIVILEGED]})
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 3
    assert judge(scaled, engine, config, operation="UPDATE", old_object=old).decision.allowed
    fixed = controller("Deployment", {"containers": [{**PRIVILEGED, "securityContext": {}}]})
    assert judge(fixed, engine, config, operation="UPDATE", old_object=old).decision.allowed
    assert not judge(old, engine, config, operation="UPDATE", old_object=fixed).decision.allowed


def test_controllers_are_not_mutated_and_exempt_namespaces_are_exempt(engine, config):
    deployment = controller("Deployment", {"containers": [PRIVILEGED]}, namespace="kube-system")
    assert mutate(decode_review(orjson.dumps(review(deployment)), 100), config).patch == []
    assert judge(deployment, engine, config).exempt


def debug_review(added: dict[str, Any], namespace: str = "ml-training") -> dict[str, Any]:
    """`kubectl debug` as the API server sends it: an UPDATE of pods/ephemeralcontainers."""
    running = pod("trainer", namespace, nodeName="node-1", schedulerName="volcano")
    after = copy.deepcopy(running)
    after["spec"]["ephemeralContainers"] = [added]
    body = review(after, operation="UPDATE")
    body["request"].update(subResource="ephemeralcontainers", oldObject=running,
                           resource={"group": "", "version": "v1", "resource": "pods"})
    return body


def test_a_privileged_debug_container_is_denied_and_a_plain_one_allowed(engine, config):
    evil = {"name": "debugger", "image": "docker.io/library/busybox:1", "securityContext": {"privileged": True}}
    body = orjson.dumps(debug_review(evil))
    result = validate(decode_review(body, 100), engine, config, (), NOW)
    assert {o.rule for o in result.rules("deny")} == {"security-privileged-container"}
    assert 'Pod pod (ephemeral): privileged (container "debugger" must not set' in result.decision.message
    plain = orjson.dumps(debug_review({"name": "debugger", "image": "registry.example.com/busybox:1"}))
    assert validate(decode_review(plain, 100), engine, config, (), NOW).decision.allowed
    assert mutate(decode_review(body, 100), config).patch == []


def resize_review(memory: str) -> dict[str, Any]:
    """An in-place resize as the API server sends it: an UPDATE of pods/resize (kubectl patch --subresource resize)."""
    running = pod("server", "ml-inference", nodeName="node-1", schedulerName="volcano",
                  annotations={"scheduling.volcano.sh/queue-name": "inference"})
    running["spec"]["containers"][0]["resources"] = {"limits": {"memory": "4Gi"}, "requests": {"memory": "4Gi"}}
    after = copy.deepcopy(running)
    after["spec"]["containers"][0]["resources"] = {"limits": {"memory": memory}, "requests": {"memory": memory}}
    body = review(after, operation="UPDATE")
    body["request"].update(subResource="resize", oldObject=running,
                           resource={"group": "", "version": "v1", "resource": "pods"})
    return body
