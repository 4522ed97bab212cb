"""vgate failing, slow, reloading and rotating, as the real API server sees it.

These tests stop, slow down or change the running vgate; each puts it back as it found it.
"""

from __future__ import annotations

import re
import shlex
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from e2e import build, charts, cluster, records
from e2e.kube import Kube, decisions_for
from e2e.waiting import eventually

from test_admission import TRAINING, pod, unique

README = build.ROOT / "docs" / "operators.md"
POLICIES = cluster.VGATE_DIR / "policies"


def rule(identifier: str, body: str) -> str:
    """An extra rule file, written as policy authors write them (METADATA first)."""
    return f"""# METADATA
# title: e2e {identifier}
# description: An end-to-end test's rule.
# custom:
#   id: {identifier}
#   severity: low
#   category: security
#   control: "MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control"
#   remediation: Remove the label.
package vgate.rules.{identifier.replace("-", "_")}

import rego.v1

import data.vgate.lib.workload.obj

{body}
"""


def current_policies() -> dict[str, str]:
    data = POLICIES / "..data"
    return {str(p.relative_to(data)): p.read_text() for p in data.rglob("*.rego")}


@pytest.fixture
def policy_set(kube: Kube) -> Iterator[dict[str, str]]:
    """The running policy set; whatever a test projects over it is projected back afterwards."""
    original = current_policies()
    yield original
    charts.project(original, POLICIES)
    name = unique("restored")
    assert eventually(lambda: kube.create(pod(name), namespace=TRAINING, dry_run=True).ok), "not restored"


@pytest.fixture
def vgate_restarted_after(kube: Kube) -> Iterator[None]:
    yield
    if not cluster.vgate_running():
        cluster.start_vgate()
    cluster.apply(cluster.vgate_webhook_configurations())


def test_objects_the_api_server_rejects_are_never_validated_by_vgate(kube: Kube) -> None:
    """What a real API server does with invalid objects, measured: one it cannot decode never reaches
    admission; one that decodes but fails validation is mutated first (the API server validates the
    object after the mutating webhooks) and never reaches /validate, so its /mutate record stands
    alone: a mutate record is not an admission, the validate record is."""
    undecodable = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": unique("typed-wrong")},
                   "spec": {"containers": "not a list"}}
    bad_quantity = pod(unique("bad-quantity"))
    bad_quantity["spec"]["containers"][0]["resources"] = {"limits": {"memory": "lots"}}
    for obj in (undecodable, bad_quantity):
        result = kube.create(obj, namespace=TRAINING)
        assert not result.ok and "cannot be handled as a Pod" in result.stderr, result.stderr
        assert decisions_for(TRAINING, obj["metadata"]["name"]) == []
    invalid = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": unique("no-containers")},
                "spec": {"containers": []}}, pod(unique("Not_A_DNS_Name"))]
    for obj in invalid:
        result = kube.create(obj, namespace=TRAINING)
        assert not result.ok and "is invalid" in result.stderr, result.stderr
        assert kube.get("pod", obj["metadata"]["name"], TRAINING) is None
        endpoints = [r["endpoint"] for r in decisions_for(TRAINING, obj["metadata"]["name"])]
        assert endpoints == ["mutate"], endpoints


def test_a_policy_reload_while_pods_are_created_loses_no_request(kube: Kube, policy_set: dict[str, str]) -> None:
    outcomes: list[tuple[str, bool, str]] = []
    stop = threading.Event()

    def create_pods() -> None:
        while not stop.is_set():
            name = unique("reload")
            labelled = pod(name)
            labelled["metadata"]["labels"]["e2e-forbidden"] = "true"
            result = kube.create(labelled, namespace=TRAINING)
            outcomes.append((name, result.ok, result.stderr))

    worker = threading.Thread(target=create_pods)
    worker.start()
    try:
        time.sleep(2)
        forbidding = rule("e2e-forbidden-label", 'deny contains "e2e: the e2e-forbidden label is refused" if '
                                                 '{ obj.metadata.labels["e2e-forbidden"] == "true" }')
        charts.project({**policy_set, "e2e-forbidden-label/policy.rego": forbidding}, POLICIES)
        assert eventually(lambda: any(not ok for _, ok, _ in outcomes), timeout=30), outcomes[-3:]
        time.sleep(5)  # past every worker's next poll (2 s) and load: the whole pool serves the new set
    finally:
        stop.set()
        worker.join()
    # Each outcome is the old set's allow or the new rule's refusal: never an error or a half-loaded set.
    for _, ok, stderr in outcomes:
        assert ok or ("e2e-forbidden-label" in stderr and 'webhook "validate.vgate.io" denied' in stderr), stderr
    assert not any(ok for _, ok, _ in outcomes[-3:]), outcomes[-3:]
    # Each worker (one decision-log segment each) swaps its set at one point: allowed, then refused.
    # The pool as a whole does not: workers poll on their own clocks, so for up to one poll interval
    # one may still allow what another already refuses.
    names = {name: ok for name, ok, _ in outcomes}
    for segment in sorted((cluster.VGATE_DIR / "audit").glob("*.jsonl")):
        per_worker = [r for r in records.decisions_in(segment) if r.get("name") in names
                      and r["endpoint"] == "validate" and r["operation"] == "CREATE" and r["kind"] == "v1/Pod"]
        verdicts = [r["decision"] for r in per_worker]
        assert verdicts == sorted(verdicts), (segment.name, verdicts)  # "allowed" < "denied": one switch
        # What kubectl was told is what the worker recorded.
        assert all((r["decision"] == "allowed") == names[r["name"]] for r in per_worker), segment.name
    # (Volcano's controller then UPDATEs each bare pod it made a PodGroup for; vgate judges that too.)
    creates = [r["name"] for r in decisions_for(TRAINING, endpoint="validate")
               if r["operation"] == "CREATE" and r["kind"] == "v1/Pod"]  # not the bindings of the pods admitted
    assert all(creates.count(name) == 1 for name in names), "a request recorded twice or not at all"


def test_a_webhook_timeout_fails_closed_and_the_decision_is_still_recorded(
        kube: Kube, policy_set: dict[str, str], vgate_restarted_after: None) -> None:
    # The API server gives up after 1 s; the slow rule keeps vgate busy past that, within its own
    # 2 s evaluation deadline.
    fast_webhooks = charts.vgate_objects({"tls": {"caBundle": "Cg=="}, "webhooks": {
        "url": cluster.VGATE_URL, "validating": {"failurePolicy": "Fail", "timeoutSeconds": 1}}})
    configurations = cluster.vgate_webhook_configurations()
    for configuration, fast in zip(configurations, fast_webhooks.webhook_configurations, strict=True):
        configuration["webhooks"][0]["timeoutSeconds"] = fast["webhooks"][0]["timeoutSeconds"]
    cluster.apply(configurations)
    slow = rule("e2e-slow", 'deny contains "e2e: slow" if { obj.metadata.labels["e2e-slow"] == "true"\n'
                            "\tcount([x | some x in numbers.range(1, 4000000)]) < 0 }")
    project_and_wait({**policy_set, "e2e-slow/policy.rego": slow})
    name = unique("slow")
    slow_pod = pod(name)
    slow_pod["metadata"]["labels"]["e2e-slow"] = "true"
    started = time.monotonic()
    result = kube.create(slow_pod, namespace=TRAINING)
    assert not result.ok, result.stdout
    assert 'failed calling webhook "validate.vgate.io"' in result.stderr, result.stderr
    assert "deadline" in result.stderr or "timeout" in result.stderr.lower(), result.stderr
    assert time.monotonic() - started < 5
    assert kube.get("pod", name, TRAINING) is None
    assert eventually(lambda: decisions_for(TRAINING, name, "validate"), timeout=10)


def project_and_wait(files: dict[str, str]) -> None:
    """Projects a new policy set and waits until every worker has had time to load it.

    /readyz shows one worker's revision; each worker polls every 2 s (wiring.reload_interval), so
    once one has the new revision, 5 s more cover the others.
    """
    before = cluster.readiness()["policyRevision"]
    charts.project(files, POLICIES)
    assert eventually(lambda: cluster.readiness().get("policyRevision") != before, timeout=30)
    time.sleep(5)


def test_certificate_rotation_while_requests_flow_loses_none(kube: Kube) -> None:
    failures: list[str] = []
    created = 0
    stop = threading.Event()

    def create_pods() -> None:
        nonlocal created
        while not stop.is_set():
            result = kube.create(pod(unique("rotate")), namespace=TRAINING, dry_run=True)
            created += 1
            if not result.ok:
                failures.append(result.stderr)

    worker = threading.Thread(target=create_pods)
    worker.start()
    before = (cluster.VGATE_DIR / "certs" / "tls.crt").read_bytes()
    try:
        time.sleep(1)
        renewed = cluster.renew_vgate_certificate()
        assert renewed != before
        # The server replaces its workers one by one once it sees the new pair; every connection
        # then gets the renewed certificate (the API server trusts both: same CA).
        assert eventually(lambda: all(served_certificate() == renewed.decode() for _ in range(6)), timeout=30)
        time.sleep(1)
    finally:
        stop.set()
        worker.join()
    assert created > 10 and failures == [], failures[:3]


def served_certificate() -> str:
    """The PEM certificate vgate's HTTPS port presents to a new connection."""
    return ssl.get_server_certificate((cluster.HOST, cluster.VGATE_PORT))


def break_glass_commands() -> list[tuple[str, str]]:
    """The README's break-glass table: (command, undo) as written, for the namespace way and vgate off."""
    section = README.read_text().split("### Break glass", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| ([^|]+) \| `([^`]+)` \| (?:`([^`]+)`)?", section, re.M)
    return [(command, undo) for _, command, undo in rows]


def run_literally(command: str, namespace: str) -> subprocess.CompletedProcess[str]:
    """A README command as an operator types it, with kubectl this cluster's and <ns> filled in."""
    words = [namespace if w == "<ns>" else w for w in shlex.split(command)]
    assert words[0] == "kubectl", command
    return subprocess.run([str(build.BIN / "kubectl"), "--kubeconfig", str(cluster.KUBECONFIG), *words[1:]],
                          capture_output=True, text=True)


def test_vgate_down_fails_closed_and_the_readme_break_glass_brings_pods_back(
        kube: Kube, vgate_restarted_after: None) -> None:
    namespace = kube.namespace(f"e2e-glass-{uuid.uuid4().hex[:4]}")
    zone, glass_node = unique("glass-zone"), unique("glass-node")
    waiting = unique("waiting")  # admitted while vgate is up, placed only once a node of its zone exists
    assert kube.create(pod(waiting, nodeSelector={"topology.kubernetes.io/zone": zone}), namespace=namespace).ok
    assert eventually(lambda: ((kube.get("pod", waiting, namespace) or {})["metadata"].get("annotations") or {})
                      .get("scheduling.k8s.io/group-name"))  # Volcano's controller gave it its PodGroup
    cluster.stop_vgate()
    result = kube.create(pod(unique("down")), namespace=namespace)
    # Validation fails closed; the mutating webhook, called first, failed open (else its name would be here).
    assert not result.ok and 'failed calling webhook "validate.vgate.io"' in result.stderr, result.stderr
    assert "mutate.vgate.io" not in result.stderr

    rows = break_glass_commands()
    [(unchecked, unchecked_undo)] = [row for row in rows if "/webhooks/1/" in row[0]]  # the binding webhook
    rows = [row for row in rows if "/webhooks/1/" not in row[0]]
    assert len(rows) == 3, rows
    # The binding webhook fails closed: the scheduler cannot place the waiting pod on a new node of its
    # zone; the way out places it unchecked, and its undo closes that again.
    [made] = [n for n in cluster.node_objects() if n["metadata"]["name"] == "zone-a-sev-1"]
    made["metadata"].update(name=glass_node)
    made["metadata"]["labels"].update({"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": glass_node})
    assert kube.apply(made).ok
    try:
        assert kube.run("wait", "--for=condition=Ready", "--timeout=60s", f"node/{glass_node}").ok
        assert not eventually(lambda: (kube.get("pod", waiting, namespace) or {})["spec"].get("nodeName"), timeout=6)
        assert run_literally(unchecked, namespace).returncode == 0, unchecked
        assert eventually(lambda: (kube.get("pod", waiting, namespace) or {})["spec"].get("nodeName"), timeout=30)
        assert unchecked_undo.startswith("helm upgrade")
        cluster.apply(cluster.vgate_webhook_configurations())
    finally:
        kube.run("delete", "node", glass_node, "--ignore-not-found")
    for command, undo in rows:
        done = run_literally(command, namespace)
        assert done.returncode == 0, (command, done.stderr)
        name = unique("glass")
        result = kube.create(pod(name), namespace=namespace)
        assert result.ok, (command, result.stderr)
        if undo.startswith("kubectl"):
            assert run_literally(undo, namespace).returncode == 0, undo
        else:  # `helm upgrade` re-creates or resets both configurations: the chart's rendering, applied
            cluster.apply(cluster.vgate_webhook_configurations())
        result = kube.create(pod(unique("undone")), namespace=namespace)
        assert not result.ok and "validate.vgate.io" in result.stderr, (undo, result.stderr)
    cluster.start_vgate()
    assert eventually(lambda: kube.create(pod(unique("back")), namespace=namespace).ok, timeout=30)


def test_the_api_server_stores_the_charts_webhook_rules_as_rendered(kube: Kube) -> None:
    """The chart's rules are valid to a real API server and not rewritten by it (scope, subresources)."""
    for configuration in cluster.vgate_webhook_configurations():
        stored = kube.get(configuration["kind"].lower(), "vgate") or {}
        assert stored["webhooks"][0]["rules"] == configuration["webhooks"][0]["rules"]
