"""Workloads created as users create them, through the real API server with Volcano beside vgate.

Each test asserts on what the API server stored and what Volcano then did (PodGroups, bindings,
pods Running on kwok's nodes), and on vgate's decision log; never on vgate's answers directly.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from e2e import build
from e2e.kube import Kube, decisions_for
from e2e.waiting import eventually

from helpers import RESTRICTED_SPEC

TRAINING = "ml-training"
# What the shipped config's training queue gives a pod that asks for nothing (qosClass Guaranteed).
GUARANTEED = {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {**copy.deepcopy(RESTRICTED_SPEC), **spec}}


def template(app: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}}, "spec": copy.deepcopy(RESTRICTED_SPEC)}


def assert_mutated_for_training(obj: dict[str, Any]) -> None:
    """A pod as vgate's training queue must leave it, as stored by the API server."""
    spec = obj["spec"]
    assert spec["schedulerName"] == "volcano"
    assert obj["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "training"
    assert (spec["priorityClassName"], spec["priority"]) == ("vgate-high", 100000)
    assert spec["containers"][0]["resources"] == GUARANTEED


# kwok runs what is bound to its nodes; a pod of a Job (batch or Volcano) runs to completion at once.
RAN = ("Running", "Succeeded")


def ran_on_a_node(stored: dict[str, Any] | None) -> bool:
    """Volcano's scheduler bound the pod and kwok's node ran it."""
    return bool(stored and stored["spec"].get("nodeName") and stored["status"].get("phase") in RAN)


def running_on_a_node(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod once Volcano's scheduler bound it and kwok's node runs it."""
    def check() -> dict[str, Any] | None:
        stored = kube.get("pod", name, namespace)
        return stored if ran_on_a_node(stored) else None
    return eventually(check, timeout=90)


def pods_of(kube: Kube, namespace: str, app: str, count: int) -> list[dict[str, Any]]:
    """``count`` pods labelled app=``app``, each bound and Running."""
    def check() -> list[dict[str, Any]]:
        pods = kube.list("pods", namespace, f"app={app}")
        ready = [p for p in pods if ran_on_a_node(p)]
        return ready if len(ready) >= count else []
    return eventually(check, timeout=120)


def test_the_control_plane_is_the_version_built(kube: Kube) -> None:
    version = json.loads(kube.run("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == build.KUBERNETES_VERSION
    assert version["clientVersion"]["gitVersion"] == build.KUBERNETES_VERSION
    nodes = kube.run("get", "nodes", "-o", "json")
    assert all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
               for n in json.loads(nodes.stdout)["items"])


def test_a_pod_is_stored_mutated_and_volcano_runs_it(kube: Kube) -> None:
    name = unique("pod")
    result = kube.create(pod(name), namespace=TRAINING)
    assert result.ok, result.stderr
    assert_mutated_for_training(kube.get("pod", name, TRAINING) or {})
    assert running_on_a_node(kube, TRAINING, name), kube.get("pod", name, TRAINING)
    records = decisions_for(TRAINING, name)
    assert {(r["endpoint"], r["decision"], r["dryRun"]) for r in records} >= {
        ("mutate", "mutated", False), ("validate", "allowed", False)}, records


def test_a_deployments_pods_are_mutated_and_bound(kube: Kube) -> None:
    name = unique("deploy")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": template(name)}}
    result = kube.create(deployment, namespace=TRAINING)
    assert result.ok, result.stderr
    pods = pods_of(kube, TRAINING, name, 2)
    assert len(pods) == 2, kube.list("pods", TRAINING, f"app={name}")
    for stored in pods:
        assert_mutated_for_training(stored)
    # The controller's pod creations were judged as the controller's, not the user's.
    creators = {r["user"] for r in decisions_for(TRAINING, endpoint="mutate")
                if r.get("name", "").startswith(name) or r.get("name") == ""}
    assert any("replicaset-controller" in user for user in creators), creators


def test_batch_jobs_and_cronjobs_pods_are_mutated_and_bound(kube: Kube) -> None:
    job, cron = unique("job"), unique("cron")
    job_template = {"template": {**template(job), "spec": {**RESTRICTED_SPEC, "restartPolicy": "Never"}}}
    cron_template = {"template": {**template(cron), "spec": {**RESTRICTED_SPEC, "restartPolicy": "Never"}}}
    result = kube.create(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job}, "spec": job_template},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": cron},
         "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": cron_template}}},
        namespace=TRAINING)
    assert result.ok, result.stderr
    # As an operator runs a CronJob now: a Job from its template.
    result = kube.run("-n", TRAINING, "create", "job", f"{cron}-now", f"--from=cronjob/{cron}")
    assert result.ok, result.stderr
    for app in (job, cron):
        pods = pods_of(kube, TRAINING, app, 1)
        assert pods, kube.list("pods", TRAINING, f"app={app}")
        assert_mutated_for_training(pods[0])


def volcano_job(name: str, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    task_template = template(name)
    task_template["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"minAvailable": replicas, "schedulerName": "volcano",
                     "tasks": [{"replicas": replicas, "name": "worker", "template": task_template}], **spec}}


def test_a_volcano_job_gets_its_queue_and_volcano_gangs_it_onto_nodes(kube: Kube) -> None:
    name = unique("vcjob")
    result = kube.create(volcano_job(name), namespace=TRAINING)
    assert result.ok, result.stderr
    stored = kube.get("jobs.batch.volcano.sh", name, TRAINING) or {}
    assert stored["spec"]["queue"] == "training"
    assert stored["spec"]["priorityClassName"] == "vgate-high"
    # Volcano's own mutation (maxRetry, each task's minAvailable) survived vgate's reinvocation.
    assert stored["spec"]["maxRetry"] == 3 and stored["spec"]["tasks"][0]["minAvailable"] == 2
    groups = eventually(lambda: [g for g in kube.list("podgroups", TRAINING)
                                 if g["metadata"].get("ownerReferences", [{}])[0].get("name") == name])
    assert groups and groups[0]["spec"]["queue"] == "training", groups
    pods = pods_of(kube, TRAINING, name, 2)
    assert len(pods) == 2, kube.list("pods", TRAINING, f"app={name}")
    for stored_pod in pods:
        assert stored_pod["spec"]["schedulerName"] == "volcano"
        assert stored_pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "training"
    # vgate saw the Job, and the PodGroup Volcano's controller created for it.
    kinds = {r["kind"] for r in decisions_for(TRAINING, endpoint="validate")}
    assert {"batch.volcano.sh/v1alpha1/Job", "scheduling.volcano.sh/v1beta1/PodGroup"} <= kinds, kinds


def test_a_denial_reaches_kubectl_with_vgates_message_and_the_log(kube: Kube) -> None:
    name = unique("priv")
    privileged = pod(name)
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    result = kube.create(privileged, namespace=TRAINING)
    assert not result.ok
    assert 'admission webhook "validate.vgate.io" denied the request' in result.stderr, result.stderr
    assert "privileged" in result.stderr
    assert kube.get("pod", name, TRAINING) is None
    assert [r["decision"] for r in decisions_for(TRAINING, name, "validate")] == ["denied"]


def test_warnings_reach_kubectl_as_warnings(kube: Kube) -> None:
    name = unique("warned")
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
             "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1"}]}}
    result = kube.create(plain, namespace=TRAINING)
    assert result.ok, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]
    assert any("[security-run-as-non-root]" in line for line in warnings), result.stderr
    # The training queue's Guaranteed QoS chose the resources this pod did not set, and says so.
    assert "Warning: pod container main set no cpu/memory: queue training (Guaranteed) gave it cpu 1, memory 4Gi; " \
           "set resources to choose" in warnings, result.stderr


def test_server_side_dry_run_is_judged_and_recorded_as_dry_run(kube: Kube) -> None:
    name = unique("dry")
    result = kube.create(pod(name), namespace=TRAINING, dry_run=True)
    assert result.ok, result.stderr
    assert kube.get("pod", name, TRAINING) is None
    records = decisions_for(TRAINING, name)
    assert {(r["endpoint"], r["dryRun"]) for r in records} == {("mutate", True), ("validate", True)}, records


def test_platform_namespaces_and_the_exempt_label_are_never_sent_to_vgate(kube: Kube) -> None:
    exempt = kube.namespace(unique("e2e-exempt"), labels={"vgate.io/exempt": "true"})
    for namespace in ("kube-system", exempt):
        name = unique("untouched")
        result = kube.create(pod(name), namespace=namespace)
        assert result.ok, result.stderr
        stored = kube.get("pod", name, namespace) or {}
        assert stored["spec"]["schedulerName"] == "default-scheduler"
        assert "priorityClassName" not in stored["spec"]
        assert decisions_for(namespace) == []
