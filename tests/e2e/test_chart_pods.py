"""The chart's gateway pods as operators run them (issue 38, items 2 and 3): the image built from the
Dockerfile, two replicas of the Deployment's pod template as Helm renders it, run by podman with the
chart's securityContext (uid 10001, read-only root, every capability dropped, RuntimeDefault
seccomp), its ConfigMaps projected as the kubelet projects them, one shared audit volume, its
default TLS (the pods keep their own certificate in the chart's Secret), behind HAProxy standing in
for the Service, serving the real API server (e2e/pods.py).

A release of its own ("pods"), its webhooks narrowed to one labelled namespace so the rest of the
suite never calls it; what only a container shows is tested here.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from e2e import build, charts, cluster, pods, records
from e2e.kube import Kube
from e2e.waiting import eventually
from webhook.cluster.api import ApiServer

from helpers import RESTRICTED_SPEC, review

RELEASE, FULLNAME = "pods", "pods-vgate"
BALANCER, HTTPS, PROBES = 16460, 16470, 16480
NAMESPACE, LABEL = "pods-tenant", "vgate-e2e/pods"
SETUP_KINDS = ("ServiceAccount", "Secret", "ConfigMap", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
FORBIDDEN = "vgate-e2e/forbidden"


@pytest.fixture(scope="module")
def release(control_plane: Kube) -> Iterator[pods.PodRelease]:
    kube = control_plane
    print(pods.build_image())  # the image and its size
    values = {"image": {"repository": pods.IMAGE.split(":")[0], "tag": pods.IMAGE.split(":")[1]},
              "replicaCount": 2, "webhooks": {"url": f"https://127.0.0.1:{BALANCER}"},
              "priorityClasses": {"create": False}, "backgroundAudit": {"enabled": False}}
    objects = charts.render(build.ROOT / "charts" / "vgate", RELEASE, charts.VGATE_NAMESPACE, values)
    release = pods.PodRelease(objects, FULLNAME, BALANCER, HTTPS, PROBES)
    kube.run("delete", "secret", f"{FULLNAME}-tls", "-n", charts.VGATE_NAMESPACE, "--ignore-not-found")
    result = kube.apply(*(o for o in objects if o["kind"] in SETUP_KINDS))
    assert result.ok, result.stderr
    configurations = charts.narrowed_webhooks(objects, LABEL)
    result = kube.apply(*configurations)
    assert result.ok, result.stderr
    try:
        release.start()
    except RuntimeError:
        release.stop()
        raise
    kube.namespace(NAMESPACE, {LABEL: "true"})
    yield release
    release.stop()
    for configuration in configurations:
        kube.run("delete", configuration["kind"].lower(), configuration["metadata"]["name"], "--ignore-not-found")
    kube.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "pods", **(labels or {})}},
            "spec": copy.deepcopy(RESTRICTED_SPEC)}


def create_at_once(names: list[str], labels: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """Dry-run creations, all at once from a client each: the API server then opens a connection per
    request in flight, and the balancer spreads connections (as kube-proxy does), not requests."""
    def create(name: str) -> tuple[int, str]:
        with ApiServer.from_kubeconfig(cluster.KUBECONFIG) as api:
            response = api.session.post(f"{api.url}/api/v1/namespaces/{NAMESPACE}/pods", params={"dryRun": "All"},
                                        json=pod(name, labels), timeout=30)
            return response.status_code, response.text

    with ThreadPoolExecutor(len(names)) as pool:
        return list(pool.map(create, names))


def decisions(release: pods.PodRelease) -> list[dict[str, Any]]:
    return [r for r in records.decisions(release.audit_dir) if r.get("namespace") == NAMESPACE]


def test_both_replicas_serve_hardened_as_rendered_and_share_one_audit_volume(release: pods.PodRelease,
                                                                            kube: Kube) -> None:
    for index in range(release.replicas):
        inside = release.exec(index, "sh", "-c", "id -u; touch /app/x 2>&1 || echo read-only; "
                                                 "grep CapEff /proc/1/status; grep -l evaluator /proc/[0-9]*/cmdline")
        lines = inside.stdout.split("\n")
        assert lines[0] == "10001" and "read-only" in inside.stdout, inside.stdout + inside.stderr
        assert "CapEff:\t0000000000000000" in inside.stdout, inside.stdout
        assert inside.stdout.count("/cmdline") >= 2, "each worker's evaluator child runs: " + inside.stdout
    for attempt in range(5):
        assert all(code == 201 for code, _ in create_at_once([f"hardened-{attempt}-{n}" for n in range(8)]))
        if {r["replica"] for r in decisions(release) if r.get("endpoint") == "validate"} == {
                f"{FULLNAME}-0", f"{FULLNAME}-1"}:
            break
    assert eventually(lambda: {r["replica"] for r in decisions(release) if r.get("endpoint") == "validate"}
                      == {f"{FULLNAME}-0", f"{FULLNAME}-1"}), "both replicas judged, through one address"


def test_a_policy_edit_through_the_config_map_reaches_both_replicas_without_a_restart(release: pods.PodRelease,
                                                                                     kube: Kube) -> None:
    config_map = release.object("ConfigMap", f"{FULLNAME}-policies")
    original = dict(config_map["data"])
    key = "scheduling-node-name-bypass.policy.rego"
    before = {json.loads(release.readyz(i)[1])["policyRevision"] for i in range(release.replicas)}

    def reloaded() -> bool:
        """Every worker of both replicas on one revision, not the old one (each reloads on its own look)."""
        revisions = [json.loads(release.readyz(i)[1] or "{}").get("policyRevisions") for i in range(release.replicas)]
        return all(r is not None and len(r) == 1 and r[0] not in before for r in revisions) and \
            len({r[0] for r in revisions if r}) == 1
    started = [release.exec(i, "sh", "-c", "cat /proc/1/stat | cut -d' ' -f22").stdout for i in range(2)]
    edited = original[key] + (
        "\ndeny contains msg if {\n"
        f'\tobject.get(obj, ["metadata", "labels", "{FORBIDDEN}"], "") == "true"\n'
        '\tmsg := "e2e: the label added by a ConfigMap edit is forbidden"\n}\n')
    try:
        release.edit_config_map(f"{FULLNAME}-policies", {**original, key: edited})
        assert eventually(reloaded, timeout=30), "every worker of both replicas reloaded"
        def judged() -> set[str]:
            """The replicas that refused a forbidden pod (a mutating call's record, allowed, is no judgement:
            the loop once stopped when one replica had mutated and the other refused every pod)."""
            return {r["replica"] for r in decisions(release)
                    if r.get("name", "").startswith("forbidden-") and r.get("decision") == "denied"}

        for attempt in range(5):
            refused = create_at_once([f"forbidden-{attempt}-{n}" for n in range(8)], {FORBIDDEN: "true"})
            assert all(code == 403 and "a ConfigMap edit is forbidden" in text for code, text in refused), refused
            if len(judged()) == 2:
                break
        assert judged() == {f"{FULLNAME}-0", f"{FULLNAME}-1"}
    finally:
        release.edit_config_map(f"{FULLNAME}-policies", original)
    assert eventually(lambda: kube.create(pod("forbidden-again", {FORBIDDEN: "true"}), namespace=NAMESPACE,
                                          dry_run=True).ok, timeout=30)
    assert [release.exec(i, "sh", "-c", "cat /proc/1/stat | cut -d' ' -f22").stdout for i in range(2)] == started, \
        "no container restarted"


def creations_meanwhile(act: Callable[[], None], clients: int = 2) -> tuple[list[tuple[float, int, str]], float]:
    """Dry-run pod creations by ``clients`` clients back to back for 20 s, with ``act`` done at 5 s: each
    creation's end, status and message, and when ``act`` began."""
    api = ApiServer.from_kubeconfig(cluster.KUBECONFIG)
    outcomes: list[tuple[float, int, str]] = []
    stop = threading.Event()

    def create(worker: int) -> None:
        count = 0
        while not stop.is_set():
            response = api.session.post(f"{api.url}/api/v1/namespaces/{NAMESPACE}/pods", params={"dryRun": "All"},
                                        json=pod(f"load-{worker}-{count}"), timeout=30)
            outcomes.append((time.monotonic(), response.status_code, response.text[:200]))
            count += 1

    threads = [threading.Thread(target=create, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(5)
    began = time.monotonic()
    act()
    time.sleep(max(0.0, began + 15 - time.monotonic()))
    stop.set()
    for thread in threads:
        thread.join()
    return outcomes, began


def test_one_replica_killed_under_load_loses_at_most_what_was_in_flight(release: pods.PodRelease,
                                                                       kube: Kube) -> None:
    """Pods created by two clients for 20 s; replica 0 killed (SIGKILL) at 5 s: what the killed replica
    held in flight may fail (failurePolicy Fail), nothing else, and the creations are counted. Measured:
    none failed, and none with HAProxy's health checks removed either: the API server retries a webhook
    call whose connection is refused or reset, so a dead replica costs only its in-flight calls."""
    outcomes, killed = creations_meanwhile(lambda: release.kill(0))
    failed = [o for o in outcomes if o[1] != 201]
    after = [o for o in outcomes if o[0] > killed + 2]
    print(f"{len(outcomes)} creations, {len(failed)} failed, {len(after)} after the kill settled")
    assert len(failed) <= 2, failed
    assert after and all(o[1] == 201 for o in after)
    assert all(o[0] >= killed - 1 for o in failed), "nothing failed before the kill"
    release.play(0)
    assert eventually(lambda: release.ready(0), timeout=120), release.logs(0)[-2000:]


def test_one_replica_stopped_under_load_loses_nothing(release: pods.PodRelease, kube: Kube) -> None:
    """A pod deleted (SIGTERM, the kubelet's stop) under the same load: its /readyz turns 503 and its
    workers answer with Connection: close for 2 s before they stop, so HAProxy (by /readyz, as the
    endpoints by the readiness probe) and the API server's connections move to the other replica
    first. Not one creation fails, where a kill may cost what was in flight."""
    readiness: list[int] = []

    def watch() -> None:
        for _ in range(30):
            readiness.append(release.readyz(0)[0])
            time.sleep(0.1)

    def stop_replica() -> None:
        watching = threading.Thread(target=watch)
        watching.start()
        release.stop_one(0)
        watching.join()

    outcomes, stopped = creations_meanwhile(stop_replica)
    failed = [o for o in outcomes if o[1] != 201]
    print(f"{len(outcomes)} creations, {len(failed)} failed; replica 0's /readyz while stopping: {readiness}")
    assert len(outcomes) > 50 and not failed, failed[:3]
    assert 503 in readiness, readiness  # it said so before it went away
    assert "answering with Connection: close" in release.logs(0)
    release.play(0)
    assert eventually(lambda: release.ready(0), timeout=120), release.logs(0)[-2000:]


# each evaluator child's /proc/PID (the pattern's brackets keep this shell's own command line out)
EVALUATORS = "for f in /proc/[0-9]*/cmdline; do grep -q 'webhook[.]policy[.]evaluator' $f && echo ${f%/cmdline}; done"


def test_a_stopped_evaluator_inside_the_container_is_replaced_and_the_replica_stays_ready(
        release: pods.PodRelease, kube: Kube) -> None:
    """SIGSTOP on every evaluator child of replica 0, from inside the container (its own uid, no
    capabilities): each worker's next readiness report finds its child silent and starts another,
    the probe stays 200 and pods are admitted through the Service without waiting out a deadline."""
    before = set(release.exec(0, "sh", "-c", EVALUATORS).stdout.split())
    assert len(before) >= 2, before
    stopped = release.exec(0, "sh", "-c", f"for p in {' '.join(before)}; do kill -STOP ${{p#/proc/}}; done")
    assert stopped.returncode == 0, stopped.stderr
    assert eventually(lambda: not before & set(release.exec(0, "sh", "-c", EVALUATORS).stdout.split())
                      and len(release.exec(0, "sh", "-c", EVALUATORS).stdout.split()) >= 2, timeout=20), \
        release.logs(0)[-2000:]
    assert release.readyz(0)[0] == 200
    started = time.monotonic()
    assert all(code == 201 for code, _ in create_at_once([f"after-stop-{n}" for n in range(6)]))
    assert time.monotonic() - started < 5
    assert "answered no ping within 1 s" in release.logs(0)


def test_a_full_audit_volume_turns_both_replicas_unready_and_back(release: pods.PodRelease, kube: Kube,
                                                                  tmp_path: Path) -> None:
    """The shared claim out of space: each decision that cannot be made durable is refused
    (audit.failureMode), /readyz answers 503 on each replica that failed to write (so the Service
    drains it), naming the directory and why, and both are ready again once the volume takes a write.
    Requests go to each replica's own port: behind a balancer the API server keeps its open
    connections to a replica marked down (kube-proxy does not cut them either)."""
    secret = kube.get("secret", f"{FULLNAME}-tls", charts.VGATE_NAMESPACE) or {}
    ca = tmp_path / "ca.crt"
    ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
    filler = release.fill_audit_claim()
    try:
        answers = []
        for attempt in range(20):  # each worker reports its readiness every 2 s
            for index in range(release.replicas):  # a segment's last page takes a few records more
                answers += [review_directly(release, index, ca, f"full-{attempt}-{index}-{n}") for n in range(8)]
            if all(release.readyz(i)[0] == 503 for i in range(release.replicas)):
                break
            time.sleep(0.5)
        statuses = [release.readyz(i) for i in range(release.replicas)]
        assert all(status == 503 and "/app/audit: No space left on device" in body for status, body in statuses), \
            statuses
        assert not any(answer["allowed"] for answer in answers[-2:]), "nothing admitted unrecorded"
        print(statuses[0][1])
    finally:
        filler.unlink()
    assert eventually(lambda: all(release.ready(i) for i in range(release.replicas)), timeout=60)
    assert all(code == 201 for code, _ in create_at_once([f"recovered-{n}" for n in range(4)]))


def review_directly(release: pods.PodRelease, index: int, ca: Path, name: str) -> dict[str, Any]:
    """An AdmissionReview of a compliant pod sent to one replica's published HTTPS port; its response."""
    answer = requests.post(f"https://127.0.0.1:{release.https_port + index}/validate",
                           json=review(pod(name), namespace=NAMESPACE, uid=name), verify=str(ca), timeout=10)
    response: dict[str, Any] = answer.json()["response"]
    return response


def test_the_report_writer_job_signs_the_hour_with_its_key_read_only_and_its_anchor_apart(
        release: pods.PodRelease, kube: Kube, tmp_path: Path) -> None:
    """The CronJob's job pod as rendered (its own account, the key Secret read-only, the anchor on its
    own claim, the audit claim shared), its clock two hours ahead so the hour has closed: it signs
    the hour the replicas wrote, and an auditor's verify on the host finds nothing wrong."""
    name = "signed-hour"
    assert kube.create(pod(name), namespace=NAMESPACE, dry_run=True).ok
    assert eventually(lambda: [r for r in decisions(release) if r.get("name") == name])
    hour = [r for r in decisions(release) if r.get("name") == name][-1]["time"][:13]
    key = Ed25519PrivateKey.generate()
    keys = release.folder("report-key")
    keys.mkdir(parents=True, exist_ok=True)
    private = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    for file, data in (("report-ed25519.key", private), ("report-ed25519.key.pub", public)):
        (keys / file).write_bytes(data)
        os.chown(keys / file, 0, pods.UID)  # the kubelet's secret volume under fsGroup: root, group-readable
        os.chmod(keys / file, 0o440)
    claims = release.root / "claims"
    anchor = claims / "report-anchor" / "reports-anchor.jsonl"
    config = yaml.safe_load(release.object("ConfigMap", f"{FULLNAME}-config")["data"]["vgate.yaml"])
    config["audit"]["dir"] = str(claims / "audit" / "audit")
    config["reports"].update(dir=str(claims / "audit" / "reports"), key=str(keys / "report-ed25519.key"),
                             anchorFile=str(anchor))
    (tmp_path / "vgate.yaml").write_text(yaml.safe_dump(config))
    with release.paused():  # the replicas' clocks are not ahead: without this their heartbeats reopen the hour
        code, log = release.run_report_writer(later="+2h")
        assert code == 0, log[-3000:]
        verify = subprocess.run(["faketime", "+2 hours", *cluster.VGATE_CLI, "audit", "verify", "--config",
                                 str(tmp_path / "vgate.yaml"), "--from", hour, "--to", hour], capture_output=True,
                                text=True, timeout=120, cwd=cluster.ROOT)
    assert anchor.stat().st_size > 0 and anchor.stat().st_uid == pods.UID
    assert verify.returncode == 0 and ", 0 problems" in verify.stdout, verify.stdout + verify.stderr
    mounted = yaml.safe_load((release.root / f"{FULLNAME}-report-writer.yaml").read_text())
    key_mount = next(m for m in mounted["spec"]["containers"][0]["volumeMounts"] if m["mountPath"] == "/app/keys")
    assert key_mount["readOnly"] is True


def test_the_report_writer_job_without_its_key_secret_fails_with_one_line(release: pods.PodRelease) -> None:
    """The key Secret not created (an empty volume where it is mounted): the job fails, and its log
    says which file it needs in one line, with no traceback."""
    keys = release.folder("report-key")
    saved = {path.name: path.read_bytes() for path in keys.glob("*")} if keys.exists() else {}
    for path in keys.glob("*"):
        path.unlink()
    keys.mkdir(parents=True, exist_ok=True)
    try:
        code, log = release.run_report_writer(later="+2h")
    finally:
        for name, data in saved.items():
            (keys / name).write_bytes(data)
    assert code != 0 and "Traceback" not in log, log[-2000:]
    said = [line for line in log.splitlines() if "/app/keys/report-ed25519.key" in line]
    assert len(said) == 1, log[-2000:]


def test_a_replica_started_on_an_audit_volume_it_cannot_write_says_so_and_takes_no_traffic(
        release: pods.PodRelease) -> None:
    """The claim owned by root, as a wrong fsGroup (or none) leaves it: a new replica starts, judges
    nothing unrecorded, and its readiness probe names the path; no traceback in its log."""
    audit = release.audit_dir
    os.chown(audit, 0, 0)
    os.chmod(audit, 0o755)
    try:
        release.play(2)
        assert eventually(lambda: "/app/audit" in release.readyz(2)[1], timeout=60), \
            (release.readyz(2), release.logs(2)[-3000:])
        status, body = release.readyz(2)
        print(body)
        assert status == 503
        assert "Traceback" not in release.logs(2)
    finally:
        os.chown(audit, pods.UID, pods.UID)
        pods.podman("pod", "rm", "-f", f"{FULLNAME}-2", check=False)
