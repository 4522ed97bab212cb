"""Where pods are actually put, judged at the binding, through the real control plane.

Volcano's real scheduler (vc-scheduler) binds pods onto kwok's nodes in several zones; vgate's
binding webhook (pods/binding and the legacy bindings resource, as the chart registers them) judges
each binding against its watched cluster state. A rogue binder (a user allowed to create bindings,
as a second scheduler or a compromised controller would be) tries the wrong nodes directly.
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from test_tenant_bypasses import grant

from e2e import cluster
from e2e.kube import Kube, Result, decisions_for
from e2e.waiting import eventually

from helpers import POLICIES, VGATE
from test_admission import TRAINING, pod, running_on_a_node, unique

ZONE = "topology.kubernetes.io/zone"
SEV = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
DIGEST = "registry.example.com/ml/trainer@sha256:" + "9f86d081" * 8


def sensitive_pod(name: str, zone: str, group: str | None = None) -> dict[str, Any]:
    """A sensitive pod every creation rule admits: pinned to ``zone`` and to memory-encrypted nodes."""
    obj = pod(name, schedulerName="volcano", nodeSelector={ZONE: zone, SEV: "true"})
    obj["metadata"]["labels"].update(SENSITIVE)
    obj["spec"]["containers"][0]["image"] = DIGEST
    if group:
        obj["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    return obj


def node(name: str, zone: str, *, encrypted: bool = True, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A kwok node as the e2e cluster makes them (Ready, running what is bound to it)."""
    [made] = [n for n in cluster.node_objects() if n["metadata"]["name"] == "zone-a-sev-1"]
    made = copy.deepcopy(made)
    labels = made["metadata"]["labels"]
    labels.update({"kubernetes.io/hostname": name, ZONE: zone})
    if not encrypted:
        labels.pop(SEV)
    made["metadata"]["name"] = name
    made["spec"]["taints"] = taints or []
    return made


def binding(name: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": TRAINING},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}


def binding_records(name: str) -> list[dict[str, Any]]:
    return [r for r in decisions_for(TRAINING, name, "validate") if r.get("kind") == "v1/Binding"]


@pytest.fixture
def nodes(kube: Kube) -> Iterator[list[str]]:
    """Nodes a test adds (by name, appended), deleted after it."""
    added: list[str] = []
    yield added
    for name in added:
        kube.run("delete", "node", name, "--ignore-not-found")


@pytest.fixture(scope="module")
def binder(control_plane: Kube) -> Kube:
    """kubectl as rogue-binder: may create pods' bindings in ml-training (as a second scheduler may)."""
    grant(control_plane, TRAINING, "rogue-binder", [""], ["pods/binding", "bindings"], ["create"])
    return Kube(cluster.identity_kubeconfig("rogue-binder", "rogue-binder"))


@pytest.fixture
def held_pods(kube: Kube) -> Iterator[Any]:
    """Sensitive pods Volcano will not place (their PodGroup wants more members than exist), for the
    rogue binder to try: made on call, deleted after the test."""
    made: list[str] = []

    def make(zone: str = "zone-a", count: int = 1) -> list[str]:
        group = unique("held")
        assert kube.create(pod_group(group, zone, 99), namespace=TRAINING).ok
        names = [f"{group}-{i}" for i in range(count)]
        for name in names:
            result = kube.create(sensitive_pod(name, zone, group), namespace=TRAINING)
            assert result.ok, result.stderr
        made.extend(names)
        return names

    yield make
    for name in made:
        kube.run("delete", "pod", name, "-n", TRAINING, "--ignore-not-found", "--wait=false")


def pod_group(name: str, zone: str | None, members: int) -> dict[str, Any]:
    """A PodGroup of its users' making, fixing the zone its sensitive members are pinned to."""
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "labels": {ZONE: zone} if zone else {}},
            "spec": {"minMember": members, "queue": "training"}}


def bind(binder: Kube, name: str, node_name: str, *, legacy: bool = False) -> Any:
    """POST a Binding as the rogue binder: to pods/<name>/binding, or to the legacy bindings resource."""
    path = f"/api/v1/namespaces/{TRAINING}/bindings" if legacy else \
        f"/api/v1/namespaces/{TRAINING}/pods/{name}/binding"
    return binder.run("create", "--raw", path, "-f", "-", input_text=json.dumps(binding(name, node_name)))


def refused_with(binder: Kube, name: str, node_name: str, reason: str, *, legacy: bool = False) -> Result:
    """A binding refused for ``reason``, tried again while vgate's watch has not yet delivered a pod
    or node created a moment ago (until then server.failureMode refuses it for that)."""
    def attempt() -> Result | None:
        result = bind(binder, name, node_name, legacy=legacy)
        assert "cluster state yet" in result.stderr or not result.ok, f"bound to {node_name}"
        return result if reason in result.stderr else None
    return eventually(attempt)


def test_the_scheduler_places_a_sensitive_volcano_job_and_each_binding_is_judged(kube: Kube) -> None:
    name = unique("sensitive-job")
    task = {"replicas": 2, "name": "worker", "template": {
        "metadata": {"labels": {"app": name, **SENSITIVE}},
        "spec": {k: v for k, v in sensitive_pod(name, "zone-a")["spec"].items()} | {"restartPolicy": "Never"}}}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
           "spec": {"minAvailable": 2, "schedulerName": "volcano", "tasks": [task]}}
    result = kube.create(job, namespace=TRAINING)
    assert result.ok, result.stderr
    assert eventually(lambda: len([p for p in kube.list("pods", TRAINING, f"app={name}")
                                   if p["spec"].get("nodeName")]) == 2, timeout=60)
    pods = kube.list("pods", TRAINING, f"app={name}")
    assert {p["spec"]["nodeName"] for p in pods} <= {"zone-a-sev-1", "zone-a-sev-2"}
    for placed in pods:
        pod_name = placed["metadata"]["name"]
        [record] = eventually(lambda name=pod_name: [r for r in binding_records(name) if r["allowed"]])
        assert record["subResource"] == "binding" and record["decision"] == "allowed"
        evidence = record["binding"]
        assert evidence["node"] == placed["spec"]["nodeName"] and evidence["zone"] == "zone-a"
        assert evidence["sensitive"] is True and evidence["nodeLabels"][SEV] == "true"
        assert evidence["workload"] == f"Job/{name}" and evidence["podGroup"].startswith(name)


def test_a_job_labelled_sensitive_in_its_metadata_makes_sensitive_pods(kube: Kube) -> None:
    """Issue 34: a Volcano Job marked sensitive only in its own metadata made pods without the label,
    which bindings and the report took for ordinary pods. Now its pods carry it (from /mutate), their
    bindings are judged and recorded as sensitive; a task that says public is refused."""
    name = unique("job-labelled")
    task = {"replicas": 1, "name": "worker", "template": {  # the egress label network-no-external asks of a task
        "metadata": {"labels": {"app": name, "vgate.io/egress": "deny"}},
        "spec": {k: v for k, v in sensitive_pod(name, "zone-a")["spec"].items()} | {"restartPolicy": "Never"}}}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {
        "name": name, "labels": {"vgate.io/data-classification": "sensitive"}},
           "spec": {"minAvailable": 1, "schedulerName": "volcano", "tasks": [task]}}
    result = kube.create(job, namespace=TRAINING)
    assert result.ok, result.stderr
    [made] = eventually(lambda: [p for p in kube.list("pods", TRAINING, f"app={name}") if p["spec"].get("nodeName")],
                        timeout=60)
    assert {k: made["metadata"]["labels"].get(k) for k in SENSITIVE} == SENSITIVE
    [record] = eventually(lambda: [r for r in binding_records(made["metadata"]["name"]) if r["allowed"]])
    assert record["binding"]["sensitive"] is True and record["binding"]["zone"] == "zone-a"
    contrary = {**job, "metadata": {**job["metadata"], "name": unique("job-split")}}
    contrary["spec"] = {**job["spec"], "tasks": [{**task, "template": {
        **task["template"], "metadata": {"labels": {"app": name, "vgate.io/data-classification": "public"}}}}]}
    refused = kube.create(contrary, namespace=TRAINING)
    assert not refused.ok and "[placement-classification-unit]" in refused.stderr, refused.stderr


def test_a_node_of_another_tenant_is_refused_and_the_scheduler_places_the_pod_elsewhere(
        kube: Kube, nodes: list[str]) -> None:
    """zone-c's only node is serving's (a PreferNoSchedule taint, which the scheduler may ignore):
    Volcano binds there, vgate refuses each time; once a node of ml-training's own appears in zone-c,
    Volcano binds there, and vgate allows it."""
    foreign, own = unique("zone-c-serving"), unique("zone-c-sev")
    nodes.append(foreign)
    assert kube.apply(node(foreign, "zone-c", taints=[
        {"key": "dedicated", "value": "serving", "effect": "PreferNoSchedule"}])).ok
    assert kube.run("wait", "--for=condition=Ready", "--timeout=60s", f"node/{foreign}").ok
    name = unique("placed")
    result = kube.create(sensitive_pod(name, "zone-c"), namespace=TRAINING)
    assert result.ok, result.stderr
    refused = eventually(lambda: [r for r in binding_records(name) if not r["allowed"]], timeout=60)
    assert refused[0]["binding"]["node"] == foreign
    assert any(rule["id"] == "placement-binding" and 'dedicated to tenant "serving"' in rule["message"]
               for rule in refused[0]["rules"]), refused[0]
    assert not (kube.get("pod", name, TRAINING) or {})["spec"].get("nodeName")  # refused: not placed
    nodes.append(own)
    assert kube.apply(node(own, "zone-c")).ok
    placed = eventually(lambda: running_on_a_node(kube, TRAINING, name), timeout=90)
    assert placed and placed["spec"]["nodeName"] == own
    [allowed] = [r for r in binding_records(name) if r["allowed"]]
    assert allowed["binding"]["node"] == own and allowed["binding"]["zone"] == "zone-c"


def test_direct_bindings_to_wrong_nodes_are_refused_by_either_path(kube: Kube, binder: Kube, held_pods: Any) -> None:
    [name] = held_pods("zone-a")
    for target, reason in (("zone-a-plain-1", "none of the memory-encryption labels"),
                           ("zone-b-sev-1", 'the node is in zone "zone-b", the pod')):
        for legacy in (False, True):  # pods/<name>/binding, and the legacy bindings resource
            result = refused_with(binder, name, target, reason, legacy=legacy)
            assert "[placement-binding]" in result.stderr, result.stderr
    assert not (kube.get("pod", name, TRAINING) or {})["spec"].get("nodeName")
    assert len([r for r in binding_records(name) if not r["allowed"]]) == 4
    # vgate eval, reading the live cluster, decides both as the server does
    offline = subprocess.run([*VGATE, "eval", "--kubeconfig", str(cluster.KUBECONFIG), "-f", "-", "-o", "json",
                              "--config", str(cluster.VGATE_DIR / "vgate.yaml"), "--policies", str(POLICIES)],
                             input=yaml.safe_dump_all([binding(name, "zone-a-plain-1"), binding(name, "zone-a-sev-1")]),
                             capture_output=True, text=True, timeout=120)
    wrong, right = json.loads(offline.stdout)
    assert not wrong["allowed"] and [v["rule"] for v in wrong["violations"]] == ["placement-binding"], wrong
    assert right["allowed"], right
    result = bind(binder, name, "zone-a-sev-1")
    assert result.ok, result.stderr
    assert (kube.get("pod", name, TRAINING) or {})["spec"]["nodeName"] == "zone-a-sev-1"


def test_a_node_relabelled_while_its_pod_is_pending_is_judged_as_it_is_now(kube: Kube, binder: Kube,
                                                                            held_pods: Any) -> None:
    [name] = held_pods("zone-a")
    assert kube.run("label", "node", "zone-a-sev-2", f"{SEV}-").ok
    try:
        time.sleep(1)  # vgate's node watch delivers the change (milliseconds); before it, the bind would pass
        refused_with(binder, name, "zone-a-sev-2", "none of the memory-encryption labels")
    finally:
        assert kube.run("label", "node", "zone-a-sev-2", f"{SEV}=true", "--overwrite").ok
    assert eventually(lambda: bind(binder, name, "zone-a-sev-2").ok)  # labelled again: allowed


def test_a_pod_group_split_across_zones_is_refused(kube: Kube, binder: Kube, held_pods: Any) -> None:
    first, second = held_pods("zone-a", count=2)
    assert refused_with(binder, first, "zone-a-plain-1", "memory-encryption")  # the watch has both pods now
    assert bind(binder, first, "zone-a-sev-1").ok
    refused_with(binder, second, "zone-b-sev-1",
                 f'would split PodGroup {first.rsplit("-", 1)[0]} across zones: its pod {first} is already on '
                 'node zone-a-sev-1 in zone "zone-a"')


def test_bindings_wait_while_vgate_is_away_and_its_cache_is_cold(kube: Kube, nodes: list[str]) -> None:
    """No binding is allowed unjudged: while vgate is stopped, and while it lists the cluster again
    after its restart, the pod stays unbound (the webhook fails closed, then failureMode deny);
    Volcano keeps trying, and places it once vgate knows the node."""
    name, zone_node = unique("cold"), unique("zone-e-sev")
    assert kube.create(sensitive_pod(name, "zone-e"), namespace=TRAINING).ok  # zone-e has no node yet
    cluster.stop_vgate()
    try:
        nodes.append(zone_node)
        assert kube.apply(node(zone_node, "zone-e")).ok
        assert kube.run("wait", "--for=condition=Ready", "--timeout=60s", f"node/{zone_node}").ok
        # Volcano tries to bind; the API server cannot call vgate, and the binding webhook fails closed
        assert not eventually(lambda: (kube.get("pod", name, TRAINING) or {})["spec"].get("nodeName"), timeout=8)
    finally:
        cluster.start_vgate()
    placed = eventually(lambda: running_on_a_node(kube, TRAINING, name), timeout=90)
    assert placed and placed["spec"]["nodeName"] == zone_node
    assert [r["allowed"] for r in binding_records(name)][-1] is True


def test_a_pod_groups_members_are_pinned_to_the_zone_it_fixes_and_it_never_moves(kube: Kube) -> None:
    """Issue 34: members of one PodGroup pinned to different zones were admitted, and bound apart when
    their bindings interleaved. Now a sensitive member is pinned to the zone its PodGroup fixes (its
    zone label, set at its creation), a PodGroup fixing none takes no sensitive member, and the zone
    label never changes: every member and every binding is judged against one immutable fact."""
    loose = unique("loose")
    assert kube.create(pod_group(loose, None, 2), namespace=TRAINING).ok
    refused = kube.create(sensitive_pod(f"{loose}-0", "zone-a", loose), namespace=TRAINING)
    assert not refused.ok and f"its PodGroup {loose} fixes no zone" in refused.stderr, refused.stderr
    fixed = unique("fixed")
    assert kube.create(pod_group(fixed, "zone-a", 99), namespace=TRAINING).ok  # a member at once: read by GET
    elsewhere = kube.create(sensitive_pod(f"{fixed}-b", "zone-b", fixed), namespace=TRAINING)
    assert not elsewhere.ok and f"where its PodGroup {fixed} is fixed to {ZONE}=zone-a" in elsewhere.stderr
    assert kube.create(sensitive_pod(f"{fixed}-a", "zone-a", fixed), namespace=TRAINING).ok
    moved = kube.run("label", "podgroup.scheduling.volcano.sh", fixed, "-n", TRAINING, f"{ZONE}=zone-b", "--overwrite")
    assert not moved.ok and "[placement-classification-fixed]" in moved.stderr, moved.stderr
    kube.run("delete", "pod", f"{fixed}-a", "-n", TRAINING, "--wait=false")


def test_concurrent_members_and_bindings_never_split_a_gang(kube: Kube, binder: Kube) -> None:
    """Many clients at once, against vgate's two workers (each its own cluster state, as replicas are):
    members of one sensitive PodGroup pinned alternately to zone-a and zone-b, then every admitted
    member bound by a rogue binder to a zone-b node and a zone-a node at the same moment. The test
    counts the splits: members admitted or placed outside zone-a. Zero."""
    import concurrent.futures

    gang = unique("gang")
    assert kube.create(pod_group(gang, "zone-a", 99), namespace=TRAINING).ok  # held: Volcano places none
    names = [f"{gang}-{index}" for index in range(16)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        created = list(pool.map(lambda pair: kube.create(sensitive_pod(pair[1], ("zone-a", "zone-b")[pair[0] % 2],
                                                                       gang), namespace=TRAINING),
                                enumerate(names)))
    admitted = [name for name, result in zip(names, created, strict=True) if result.ok]
    pinned = {name: (kube.get("pod", name, TRAINING) or {})["spec"]["nodeSelector"][ZONE] for name in admitted}
    assert len(admitted) == 8 and set(pinned.values()) == {"zone-a"}, pinned  # none admitted outside its zone
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        attempts = list(pool.map(lambda job: bind(binder, *job), [
            (name, node_name) for name in admitted for node_name in ("zone-b-sev-1", "zone-a-sev-1")]))

    def node_of(name: str) -> str | None:
        return (kube.get("pod", name, TRAINING) or {})["spec"].get("nodeName")
    def placed_in_its_zone(name: str) -> str | None:
        return node_of(name) or (bind(binder, name, "zone-a-sev-1").ok and node_of(name)) or None
    for member in admitted:  # a member the watch had not delivered at its bind: placed in its zone now
        assert eventually(lambda: placed_in_its_zone(member))  # noqa: B023 - called at once
    placed = {name: node_of(name) for name in admitted}
    zones = {(kube.get("node", str(node_name)) or {})["metadata"]["labels"][ZONE] for node_name in placed.values()}
    splits = len(zones) - 1
    assert splits == 0 and zones == {"zone-a"}, (placed, [a.stderr[-200:] for a in attempts if not a.ok][:3])
    assert len(created) == 16 and len(attempts) == 2 * len(admitted)
    for name in admitted:
        kube.run("delete", "pod", name, "-n", TRAINING, "--wait=false")
