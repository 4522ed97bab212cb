"""A hostile tenant's tries, through the real API server, with a tenant's own namespace-scoped RBAC.

The tenant may create and update Pods, Deployments, Volcano Jobs and PodGroups in its namespace
and nothing else, as a platform team grants it; each bypass is also judged by `vgate eval` with the
same config, which must agree with the server.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import cluster
from e2e.kube import Kube, Result, decisions_for
from e2e.waiting import eventually

from test_admission import pod, unique

TENANT = "e2e-tenant"
CONFIG = cluster.HOST_CONFIG


def grant(admin: Kube, namespace: str, user: str, groups: list[str], resources: list[str], verbs: list[str]) -> None:
    """A Role in ``namespace`` and its RoleBinding to ``user``: what a platform team gives a tenant."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": f"tenant-{user}", "namespace": namespace},
            "rules": [{"apiGroups": groups, "resources": resources, "verbs": verbs}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": f"tenant-{user}", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"tenant-{user}"},
               "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}
    result = admin.apply(role, binding)
    assert result.ok, result.stderr


@pytest.fixture(scope="module")
def tenant(control_plane: Kube) -> Kube:
    """kubectl as user tenant-a, who holds a Role in its namespace only."""
    control_plane.namespace(TENANT)
    verbs = ["get", "list", "create", "update", "patch", "delete"]
    grant(control_plane, TENANT, "tenant-a", ["", "apps", "batch.volcano.sh", "scheduling.volcano.sh"],
          ["pods", "pods/resize", "deployments", "jobs", "podgroups"], verbs)
    kube = Kube(cluster.identity_kubeconfig("tenant-a", "tenant-a"))
    assert not kube.run("get", "pods", "-n", "kube-system").ok  # namespace-scoped, really
    return kube


@pytest.fixture
def live_config(control_plane: Kube) -> Iterator[Any]:
    """Changes vgate's running config (as a ConfigMap edit would) and puts it back afterwards;
    returns the changed config as the CLI here reads it."""
    originals = {path: path.read_text() for path in cluster.vgate_configs()}

    def change(**sections: dict[str, Any]) -> Path:
        changed = {}
        for path, text in originals.items():
            document = yaml.safe_load(text)
            for name, keys in sections.items():
                document[name] = {**document.get(name, {}), **keys}
            changed[path] = yaml.safe_dump(document, sort_keys=False)
        _swap(changed)
        return CONFIG

    yield change
    _swap(originals)


def _swap(texts: dict[Path, str]) -> None:
    """Writes the configs and waits until vgate's workers serve them (each polls every 2 s)."""
    def reloaded_at() -> str | None:
        return (cluster.readiness().get("lastReload") or {}).get("at")

    before = reloaded_at()
    time.sleep(1.1)  # lastReload.at has whole seconds
    for path, text in texts.items():
        cluster.write_vgate_config(path, text)
    assert eventually(lambda: reloaded_at() not in (None, before), timeout=20)
    time.sleep(5)


def vgate_eval(config: Path, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cluster.VGATE_CLI, "eval", "-f", "-", "--namespace", TENANT, "--config", str(config),
                           "--policies", str(cluster.VGATE_DIR / "policies")],
                          input=yaml.safe_dump(obj), capture_output=True, text=True, cwd=cluster.ROOT)


def test_an_upper_case_first_component_is_a_registry_host_not_docker_hub(tenant: Kube, live_config: Any) -> None:
    config = live_config(images={"allowedRegistries": ["docker.io/"]})
    hub = pod(unique("hub"))
    hub["spec"]["containers"][0]["image"] = "team/app:1.0"
    result = tenant.create(hub, namespace=TENANT)
    assert result.ok, result.stderr
    for image in ("Evilhost/x:1", "EVIL/miner:1", "docker.io.evil.io/x:1"):
        evil = pod(unique("evil"))
        evil["spec"]["containers"][0]["image"] = image
        result = tenant.create(evil, namespace=TENANT)
        assert not result.ok and "[supply-chain-image-registry]" in result.stderr, (image, result.stderr)
        offline = vgate_eval(config, evil)
        assert offline.returncode == 1 and "supply-chain-image-registry" in offline.stdout, offline.stdout


INFERENCE = "ml-inference"  # queue inference: caps memory limits at 64Gi, allows only vgate-critical


@pytest.fixture(scope="module")
def inference_tenant(control_plane: Kube) -> Kube:
    """kubectl as tenant-b, who may create pods in ml-inference only."""
    grant(control_plane, INFERENCE, "tenant-b", [""], ["pods", "pods/resize"], ["get", "create", "update", "patch"])
    return Kube(cluster.identity_kubeconfig("tenant-b", "tenant-b"))


def forged(memory: str, priority_class: str | None = None) -> dict[str, Any]:
    """A pod that claims vgate already passed (vgate.io/injected) and names Volcano's default queue."""
    obj = pod(unique("forged"))
    obj["metadata"]["annotations"] = {"vgate.io/injected": "none", "scheduling.volcano.sh/queue-name": "default"}
    obj["spec"]["containers"][0]["resources"] = {"limits": {"memory": memory}}
    if priority_class:
        obj["spec"]["priorityClassName"] = priority_class
    return obj


def test_a_forged_vgate_record_does_not_escape_the_namespaces_queue(inference_tenant: Kube, kube: Kube) -> None:
    for bypass, rule in ((forged("1Ti"), "resources-memory-limit-cap"),
                         (forged("1Gi", "vgate-normal"), "scheduling-priority-class-allowed")):
        result = inference_tenant.create(bypass, namespace=INFERENCE)
        assert not result.ok and f"[{rule}]" in result.stderr, result.stderr
        assert 'queue "inference"' in result.stderr, result.stderr
    # A forged record only makes vgate fill in less: the scheduler it left alone is refused ...
    result = inference_tenant.create(forged("1Gi"), namespace=INFERENCE)
    assert not result.ok and "[scheduling-volcano-scheduler]" in result.stderr, result.stderr
    # ... and with that set, the pod is admitted in the namespace's queue, whatever the record said.
    honest = forged("1Gi")
    honest["spec"]["schedulerName"] = "volcano"
    result = inference_tenant.create(honest, namespace=INFERENCE)
    assert result.ok, result.stderr
    stored = kube.get("pod", honest["metadata"]["name"], INFERENCE) or {}
    assert stored["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "inference"
    assert stored["spec"]["priorityClassName"] == "vgate-critical"


def test_an_unmutated_pod_is_judged_by_its_namespaces_queue(inference_tenant: Kube, kube: Kube) -> None:
    """/mutate fails open: with it out of the way, /validate alone must still hold the queue's rules."""
    kube.run("delete", "mutatingwebhookconfiguration", "vgate")
    try:
        for memory in ("65Gi", "1Ti"):
            raw = pod(unique("raw"), schedulerName="volcano")  # all the scheduler rule asks for
            raw["spec"]["containers"][0]["resources"] = {"limits": {"memory": memory}}
            result = inference_tenant.create(raw, namespace=INFERENCE)
            assert not result.ok and "[resources-memory-limit-cap]" in result.stderr, result.stderr
        bare = pod(unique("bare"), schedulerName="volcano")  # no memory limit at all, in a Guaranteed queue
        result = inference_tenant.create(bare, namespace=INFERENCE)
        assert not result.ok and "[resources-memory-limits-required]" in result.stderr, result.stderr
    finally:
        cluster.apply(cluster.vgate_webhook_configurations())


def test_an_in_place_resize_is_judged_by_the_resource_rules(inference_tenant: Kube, kube: Kube) -> None:
    """Bypass: pods/resize was not registered, so a pod created at 4Gi could be resized to 1Ti."""
    # Pending (no node is in that zone): the API server lets a resize reach admission for a pod with no
    # running container, or on a kubelet that reports container resources, which kwok's does not.
    name = unique("resize")
    result = inference_tenant.create(pod(name, nodeSelector={"topology.kubernetes.io/zone": "nowhere"}),
                                     namespace=INFERENCE)
    assert result.ok, result.stderr

    def resize(memory: str) -> Result:
        change = {"spec": {"containers": [{"name": "main", "resources": {
            "limits": {"memory": memory}, "requests": {"memory": memory}}}]}}
        return inference_tenant.run("-n", INFERENCE, "patch", "pod", name, "--subresource", "resize",
                                    "--patch", json.dumps(change))

    result = resize("1Ti")
    assert not result.ok and "[resources-memory-limit-cap]" in result.stderr, result.stderr
    assert "pod (resize)" in result.stderr
    result = resize("8Gi")
    assert result.ok, result.stderr
    stored = kube.get("pod", name, INFERENCE) or {}
    assert stored["spec"]["containers"][0]["resources"]["limits"]["memory"] == "8Gi"


def test_an_update_adding_a_foreign_toleration_is_denied(tenant: Kube) -> None:
    """Bypass: a pending pod could gain `dedicated=serving:NoSchedule` (or `operator: Exists`) by UPDATE."""
    name = unique("tolerate")
    result = tenant.create(pod(name, schedulerName="volcano", nodeSelector={"topology.kubernetes.io/zone": "nowhere"}),
                           namespace=TENANT)
    assert result.ok, result.stderr
    for toleration in ({"key": "dedicated", "operator": "Equal", "value": "serving", "effect": "NoSchedule"},
                       {"operator": "Exists"}):
        patch = [{"op": "add", "path": "/spec/tolerations/-", "value": toleration}]
        result = tenant.run("-n", TENANT, "patch", "pod", name, "--type=json", "-p", json.dumps(patch))
        assert not result.ok and "[placement-foreign-taint-toleration]" in result.stderr, result.stderr
    # An UPDATE that adds no toleration (a label) is not judged on the tolerations the pod already had.
    assert tenant.run("-n", TENANT, "label", "pod", name, "touched=yes").ok


def test_an_update_moving_a_pod_group_to_a_foreign_queue_is_denied(tenant: Kube, kube: Kube) -> None:
    """Bypass: a PodGroup's CREATE in queue training was denied, its UPDATE into it allowed."""
    name = unique("group")
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
             "spec": {"minMember": 1}}
    result = tenant.create(group, namespace=TENANT)
    assert result.ok, result.stderr
    moved = tenant.run("-n", TENANT, "patch", "podgroup", name, "--type=merge", "-p", '{"spec":{"queue":"training"}}')
    assert not moved.ok and "[scheduling-queue-allowed]" in moved.stderr, moved.stderr
    assert (kube.get("podgroup", name, TENANT) or {})["spec"]["queue"] == "default"


def test_a_pod_groups_status_writes_skip_vgate_and_every_judged_field_still_reaches_it(tenant: Kube) -> None:
    """Issue 39: Volcano's PodGroup has no status subresource, so the controller's and scheduler's
    status writes reached /validate (~3 calls per pod). The validating webhook's matchCondition now
    sends a PodGroup UPDATE only when its spec, labels, annotations or owners change. Bypass: an
    UPDATE changing any one of them together with the status is still sent and judged."""
    name = unique("group-status")
    def group(group_name: str) -> dict[str, Any]:  # never enough members: the scheduler leaves it Pending
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": group_name},
                "spec": {"minMember": 99}}
    assert tenant.create(group(name), namespace=TENANT).ok
    assert tenant.create(group(f"{name}-owner"), namespace=TENANT).ok

    def updates() -> list[dict[str, Any]]:
        return [r for r in decisions_for(TENANT, name, "validate") if r["operation"] == "UPDATE"]

    def patch(body: dict[str, Any]) -> Result:
        return tenant.run("-n", TENANT, "patch", "podgroup", name, "--type=merge", "-p", json.dumps(body))

    for phase in ("Inqueue", "Running", "Pending"):
        assert patch({"status": {"phase": phase, "running": 3}}).ok
    assert updates() == []  # three status writes, none sent
    stored = tenant.run("-n", TENANT, "get", "podgroup", f"{name}-owner", "-o", "json")
    owner_uid = json.loads(stored.stdout)["metadata"]["uid"]  # an owner that exists: the collector keeps it
    changes: list[dict[str, Any]] = [
        {"spec": {"minMember": 98}},
        {"metadata": {"labels": {"team": "vision"}}},
        {"metadata": {"annotations": {"note": "x"}}},
        {"metadata": {"ownerReferences": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                           "name": f"{name}-owner", "uid": owner_uid}]}},
    ]
    for step, change in enumerate(changes):
        before = len(updates())  # the API server re-runs admission when a patch conflicts with the scheduler's write
        assert patch({**change, "status": {"phase": "Inqueue" if step % 2 else "Pending"}}).ok, change
        assert len(updates()) > before, change
    refused = patch({"spec": {"queue": "training"}, "status": {"phase": "Running"}})
    assert not refused.ok and "[scheduling-queue-allowed]" in refused.stderr, refused.stderr


@pytest.mark.parametrize("labels", [{"vgate.io/data-classification": "Sensitive"}, {"vgate.io/egress": "Deny"}],
                         ids=["Sensitive", "Deny"])
def test_a_near_miss_classification_is_refused_not_treated_as_ordinary(tenant: Kube, labels: dict[str, str]) -> None:
    """Issue 34: a pod labelled `Sensitive` was admitted as an ordinary pod (no placement rule applied),
    and a Deployment's template the same; both refused now, naming the value to write."""
    bare = pod(unique("near-miss"))
    bare["metadata"]["labels"].update(labels)
    result = tenant.create(bare, namespace=TENANT)
    assert not result.ok and "[placement-classification-exact]" in result.stderr, result.stderr
    key, value = next(iter(labels.items()))
    assert f'label {key}="{value}" is not' in result.stderr
    template = pod(unique("near-miss-app"))
    template["metadata"]["labels"].update(labels)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": template["metadata"]["name"]},
                  "spec": {"selector": {"matchLabels": {"app": template["metadata"]["name"]}},
                           "template": {"metadata": template["metadata"], "spec": template["spec"]}}}
    refused = tenant.create(deployment, namespace=TENANT)
    assert not refused.ok and "[placement-classification-exact]" in refused.stderr, refused.stderr
