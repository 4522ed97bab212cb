"""Cluster state through the real API server: vgate watches Namespaces as the chart's ServiceAccount
(with the chart's ClusterRole, nothing more), and a namespace's Volcano queue annotation wins over
queues.byNamespace for what vgate assigns; a tenant cannot use the annotation to reach a queue its
namespace may not use. Asserted on what the API server stored or refused, and on the decision log."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from e2e import cluster
from e2e.kube import Kube, decisions_for
from e2e.waiting import eventually

from helpers import RESTRICTED_SPEC, VGATE
from test_admission import unique

QUEUE = "scheduling.volcano.sh/queue-name"


def annotated_namespace(kube: Kube, name: str, queue: str | None) -> str:
    kube.namespace(name)
    if queue is not None:
        annotate(kube, name, queue)
    return name


def annotate(kube: Kube, namespace: str, queue: str) -> None:
    result = kube.run("annotate", "namespace", namespace, f"{QUEUE}={queue}", "--overwrite")
    assert result.ok, result.stderr


@contextmanager
def annotation(kube: Kube, namespace: str, queue: str) -> Iterator[None]:
    """The namespace annotated with ``queue`` while the block runs, and not after."""
    annotate(kube, namespace, queue)
    try:
        yield
    finally:
        assert kube.run("annotate", "namespace", namespace, f"{QUEUE}-").ok


def plain_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {**copy.deepcopy(RESTRICTED_SPEC),
                     "containers": [{**RESTRICTED_SPEC["containers"][0],
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                   "limits": {"cpu": "100m", "memory": "128Mi"}}}]}}


def stored_queue(kube: Kube, namespace: str, name: str) -> str | None:
    stored = kube.get("pod", name, namespace)
    return ((stored or {}).get("metadata") or {}).get("annotations", {}).get(QUEUE)


def test_vgate_is_ready_once_it_has_listed_the_namespaces(kube):
    ready = eventually(lambda: cluster.readiness().get("cluster"))
    assert ready and ready["Namespace"]["synced"] and ready["Namespace"]["objects"] >= 4, ready


def dry_run_queue(kube: Kube, namespace: str, pod: dict[str, Any]) -> str | None:
    """The queue the API server would store for ``pod`` (a server-side dry run: vgate answers it too)."""
    result = kube.run("create", "-n", namespace, "--dry-run=server", "-o", "json", "-f", "-",
                      input_text=json.dumps(pod))
    return json.loads(result.stdout)["metadata"].get("annotations", {}).get(QUEUE) if result.ok else None


def test_the_namespaces_queue_annotation_wins_over_the_config(kube):
    namespace = annotated_namespace(kube, unique("annotated"), "batch")  # byNamespace has no entry for it
    name = unique("pod")
    # the watch delivers the annotation within moments of the namespace's creation
    assert eventually(lambda: dry_run_queue(kube, namespace, plain_pod(name)) == "batch")
    result = kube.create(plain_pod(name), namespace=namespace)
    assert result.ok, result.stderr
    assert stored_queue(kube, namespace, name) == "batch"
    mutated = [r for r in decisions_for(namespace, name, "mutate") if not r.get("dryRun")]
    assert [(r["queue"], r["queueSource"]) for r in mutated] == [("batch", "namespace annotation")]


def test_the_annotation_wins_over_queues_by_namespace(kube):
    namespace = "ml-inference"  # the config maps it to the inference queue
    assert dry_run_queue(kube, namespace, plain_pod(unique("pod"))) == "inference"
    with annotation(kube, namespace, "batch"):
        assert eventually(lambda: dry_run_queue(kube, namespace, plain_pod(unique("pod"))) == "batch")
    assert eventually(lambda: dry_run_queue(kube, namespace, plain_pod(unique("pod"))) == "inference")


def test_a_changed_annotation_reaches_the_next_pod(kube):
    namespace = annotated_namespace(kube, unique("relabelled"), None)
    first = unique("pod")
    assert kube.create(plain_pod(first), namespace=namespace).ok
    assert stored_queue(kube, namespace, first) == "default"  # not annotated, not in byNamespace
    annotate(kube, namespace, "batch")

    def next_pod_in_batch() -> bool:
        name = unique("pod")
        return kube.create(plain_pod(name), namespace=namespace).ok and stored_queue(kube, namespace, name) == "batch"

    assert eventually(next_pod_in_batch)


def test_the_annotation_cannot_take_a_tenant_into_another_tenants_queue(kube):
    # training may be used from ml-training and research-* only: an annotation naming it elsewhere
    # routes the pod there, and the rule on the queue's namespaces refuses it.
    namespace = annotated_namespace(kube, unique("intruder"), "training")
    name = unique("pod")

    def refused() -> str:
        result = kube.create(plain_pod(name), namespace=namespace)
        return "" if result.ok else result.stderr

    message = eventually(refused)
    assert "names Volcano queue \"training\", which that namespace may not use" in message, message
    assert kube.get("pod", name, namespace) is None


def test_vgate_reads_the_cluster_with_its_chart_role_and_no_more(kube):
    account = "system:serviceaccount:vgate-system:vgate"
    reads = ("namespaces", "nodes", "pods", "services", "networkpolicies.networking.k8s.io",
             "queues.scheduling.volcano.sh", "podgroups.scheduling.volcano.sh", "priorityclasses.scheduling.k8s.io")
    writes = ("list secrets", "list configmaps", "watch configmaps", "get secrets", "create pods",
              "create pods/binding", "create bindings", "patch namespaces", "patch nodes",
              "update podgroups.scheduling.volcano.sh", "delete pods",
              "create networkpolicies.networking.k8s.io", "patch services", "list endpoints")
    asked = [f"{verb} {resource}" for resource in reads for verb in ("get", "list", "watch")] + list(writes)
    can = {question: kube.run("auth", "can-i", *question.split(), f"--as={account}").stdout.strip()
           for question in asked}
    can["get configmaps"] = kube.run("auth", "can-i", "get", "configmaps", f"--as={account}").stdout.strip()
    assert can == {**{question: "no" if question in writes else "yes" for question in asked},
                   "get configmaps": "yes"}  # a SparkApplication's sparkConfigMap, by name


def test_vgate_eval_reads_the_live_namespaces_and_agrees_with_the_server(kube, tmp_path):
    namespace = annotated_namespace(kube, unique("evaluated"), "batch")
    name = unique("pod")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(json.dumps({**plain_pod(name), "metadata": {"name": name, "namespace": namespace}}))
    offline = subprocess.run([*VGATE, "eval", "--kubeconfig", str(cluster.KUBECONFIG), "-f", str(manifest),
                              "-o", "json"], capture_output=True, text=True, timeout=120)
    [verdict] = json.loads(offline.stdout)
    [annotations] = [op["value"] for op in verdict["patch"] if op["path"] == "/metadata/annotations"]
    assert eventually(lambda: dry_run_queue(kube, namespace, plain_pod(name)) == "batch")
    assert kube.create(plain_pod(name), namespace=namespace).ok
    assert annotations[QUEUE] == stored_queue(kube, namespace, name) == "batch"


def exec_kubeconfig(tmp_path, plugin_body: str):
    """The admin kubeconfig with its client certificate given by an exec credential plugin instead
    (as EKS, GKE and AKS kubeconfigs give theirs), the plugin named relative to the kubeconfig."""
    import yaml

    admin = yaml.safe_load(cluster.KUBECONFIG.read_text())
    user = admin["users"][0]["user"]
    plugin = tmp_path / "bin" / "credential-plugin"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("#!/usr/bin/env python3\n" + plugin_body.format(cert=user["client-certificate"],
                                                                       key=user["client-key"], seen=tmp_path / "seen"))
    plugin.chmod(0o755)
    admin["users"][0]["user"] = {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "bin/credential-plugin",
        "args": ["--cluster", "e2e"], "env": [{"name": "PLUGIN_MODE", "value": "e2e"}],
        "interactiveMode": "IfAvailable", "provideClusterInfo": True}}
    config = tmp_path / "exec.kubeconfig"
    config.write_text(yaml.safe_dump(admin))
    return config


GOOD_PLUGIN = """import json, os, sys
open("{seen}", "w").write(json.dumps({{"info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
                                       "args": sys.argv[1:], "mode": os.environ.get("PLUGIN_MODE")}}))
status = {{"clientCertificateData": open("{cert}").read(), "clientKeyData": open("{key}").read()}}
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}}))
"""


def test_vgate_eval_reads_the_cluster_through_an_exec_credential_plugin(kube, tmp_path):
    """`vgate eval --kubeconfig` with an exec plugin (it ignored them: EKS, GKE and AKS kubeconfigs use
    them): the plugin runs as kubectl runs it, non-interactive, and its credential reads the cluster."""
    namespace = annotated_namespace(kube, unique("exec-evaluated"), "batch")
    name = unique("pod")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(json.dumps({**plain_pod(name), "metadata": {"name": name, "namespace": namespace}}))
    config = exec_kubeconfig(tmp_path, GOOD_PLUGIN)
    offline = subprocess.run([*VGATE, "eval", "--kubeconfig", str(config), "-f", str(manifest), "-o", "json"],
                             capture_output=True, text=True, timeout=120)
    assert offline.returncode == 0, offline.stderr
    [verdict] = json.loads(offline.stdout)
    [annotations] = [op["value"] for op in verdict["patch"] if op["path"] == "/metadata/annotations"]
    assert annotations[QUEUE] == "batch"  # the live namespace's annotation: read with the plugin's credential
    seen = json.loads((tmp_path / "seen").read_text())
    assert seen["info"]["spec"]["interactive"] is False and seen["info"]["spec"]["cluster"]["server"]
    assert seen["args"] == ["--cluster", "e2e"] and seen["mode"] == "e2e"
    failing = exec_kubeconfig(tmp_path / "failing", "import sys\nsys.exit('token expired: run aws sso login')\n")
    refused = subprocess.run([*VGATE, "eval", "--kubeconfig", str(failing), "-f", str(manifest)],
                             capture_output=True, text=True, timeout=120)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "token expired: run aws sso login" in lines[0] and "credential-plugin" in lines[0], lines


def assert_follows_the_annotation(kube: Kube, namespace: str, refusal: Callable[[], str]) -> None:
    """Refused as the training queue's (vgate-low is not its class), admitted while the namespace is
    annotated batch (whose class it is), refused again once the annotation is gone."""
    training = 'queue "training" uses priority class "vgate-low"'
    assert training in refusal()
    with annotation(kube, namespace, "batch"):
        assert eventually(lambda: refusal() == "")
    assert eventually(lambda: training in refusal())


def deployment(name: str) -> dict[str, Any]:
    """Pods asking for vgate-low: the training queue refuses that class, the batch queue allows only it."""
    spec = {**copy.deepcopy(plain_pod(name)["spec"]), "priorityClassName": "vgate-low"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def test_a_deployment_is_judged_by_the_queue_the_namespace_annotation_gives_its_pods(kube):
    """A Deployment, which vgate does not mutate, is judged as the pod vgate's mutation will make of
    its template: in the queue the namespace's annotation gives."""
    namespace, name = "ml-training", unique("deploy")

    def refusal() -> str:
        result = kube.run("create", "-n", namespace, "--dry-run=server", "-f", "-",
                          input_text=json.dumps(deployment(name)))
        return "" if result.ok else result.stderr

    assert_follows_the_annotation(kube, namespace, refusal)


def test_the_rules_read_the_annotation_from_the_cluster_state_when_mutate_was_skipped(kube):
    """/validate of a pod that names no queue (the mutating webhook failed open, or was skipped): the
    rules infer its queue from data.inventory, the cluster state the evaluator child is given."""
    import requests

    namespace = "ml-training"
    pod = {**plain_pod("unmutated"), "metadata": {"name": "unmutated", "namespace": namespace}}
    pod["spec"]["priorityClassName"] = "vgate-low"
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "e2e-unmutated", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": namespace,
        "operation": "CREATE", "userInfo": {"username": "e2e"}, "object": pod}}

    def refusal() -> str:
        answer = requests.post(f"{cluster.VGATE_URL}/validate", json=review, timeout=10,
                               verify=str(cluster.VGATE_DIR / "certs" / "ca.crt")).json()["response"]
        return "" if answer["allowed"] else answer["status"]["message"]

    assert_follows_the_annotation(kube, namespace, refusal)
