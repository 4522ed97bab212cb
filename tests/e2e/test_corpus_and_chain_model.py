"""Every Volcano example created for real, and `vgate eval`'s chain model held to what happened.

Each object of ../shared/corpus/volcano-examples is created with kubectl in a namespace the
recording webhooks watch (e2e/recorder.py). For every object the API server sent vgate, `vgate
eval --with-volcano` must predict, field by field, the object vgate's /mutate first received and
the one its /validate judged, and the decision kubectl reported; without --with-volcano the
prediction may differ only where the chain says Volcano's webhooks changed the object.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import charts, cluster, pki
from e2e.kube import Kube, decisions_for
from e2e.recorder import LABEL, Recorder
from e2e.waiting import eventually

from helpers import CORPUS

NAMESPACE = "e2e-chain"
EXAMPLES = CORPUS / "volcano-examples"
# Set by the API server on every object, unknowable offline: identity, time, bookkeeping.
SERVER_SET = {"uid", "creationTimestamp", "managedFields", "resourceVersion", "generation"}


def corpus() -> list[tuple[str, dict[str, Any]]]:
    """Every object of the examples, named uniquely (several files reuse a name)."""
    seen: set[tuple[str, str]] = set()
    objects = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for index, document in enumerate(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)):
            obj = copy.deepcopy(document)
            metadata = obj.setdefault("metadata", {})
            metadata.pop("namespace", None)
            if "name" in metadata:  # (generateName objects: Argo Workflows, a kind this cluster lacks)
                if (obj["kind"], metadata["name"]) in seen:
                    metadata["name"] = f"{metadata['name']}-{path.stem[:20].lower().replace('_', '-')}-{index}"
                seen.add((obj["kind"], metadata["name"]))
            objects.append((f"{path.name}#{index}", obj))
    return objects


def strip(obj: Any) -> Any:
    """``obj`` without what only the server can know, and with the token volume's random suffix named."""
    obj = copy.deepcopy(obj)
    for key in SERVER_SET:
        obj.get("metadata", {}).pop(key, None)
    spec = obj.get("spec", {})
    for volume in spec.get("volumes", []) if isinstance(spec, dict) else []:
        if str(volume.get("name", "")).startswith("kube-api-access-"):
            volume["name"] = "kube-api-access-*"
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])] if isinstance(spec, dict) else []:
        for mount in container.get("volumeMounts", []):
            if str(mount.get("name", "")).startswith("kube-api-access-"):
                mount["name"] = "kube-api-access-*"
    return obj


def differences(predicted: Any, real: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every JSON path where the two differ, with both values (absent: the string '<absent>')."""
    if isinstance(predicted, dict) and isinstance(real, dict):
        found = []
        for key in sorted(set(predicted) | set(real)):
            child = f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if key not in predicted or key not in real:
                found.append((child, predicted.get(key, "<absent>"), real.get(key, "<absent>")))
            else:
                found += differences(predicted[key], real[key], child)
        return found
    if isinstance(predicted, list) and isinstance(real, list) and len(predicted) == len(real):
        return [d for i, (p, r) in enumerate(zip(predicted, real, strict=True))
                for d in differences(p, r, f"{path}/{i}")]
    return [] if predicted == real else [(path, predicted, real)]


@pytest.fixture(scope="module")
def recorded(control_plane: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every corpus object created for real; what the recorder saw and what kubectl said of each."""
    workdir = tmp_path_factory.mktemp("chain")
    authority = pki.Authority(cluster.RUN / "pki", "e2e-ca")
    recorder = Recorder(authority, workdir)
    bundle = base64.b64encode(authority.cert_path.read_bytes()).decode()
    since = datetime.now(timezone.utc).isoformat()  # the decision log's time format; a reused cluster keeps older
    cluster.apply(recorder.configurations(bundle))
    control_plane.namespace(NAMESPACE, labels={LABEL: "true"})
    outcomes = {}
    objects = corpus()
    for _, obj in objects:  # cluster-scoped examples (Queues, ClusterRoles) a reused cluster may still hold
        if obj["kind"] in ("Queue", "ClusterRole", "ClusterRoleBinding", "PriorityClass") and "name" in obj["metadata"]:
            control_plane.run("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found")
    for source, obj in objects:
        result = control_plane.create(obj, namespace=NAMESPACE)
        outcomes[source] = result
    yield {"recorder": recorder, "objects": objects, "outcomes": outcomes, "workdir": workdir, "since": since}
    control_plane.run("delete", "mutatingwebhookconfiguration", "0-e2e-recorder")
    control_plane.run("delete", "validatingwebhookconfiguration", "zz-e2e-recorder")
    recorder.stop()


def test_every_example_the_api_server_accepts_is_created(recorded: dict[str, Any]) -> None:
    outcomes = recorded["outcomes"]
    refused = {source: result.stderr.strip() for source, result in outcomes.items() if not result.ok}
    for source, reason in refused.items():
        if source.startswith("invalid_jobs_"):  # Volcano's own webhook refuses these by design (vgate may too)
            assert re.search(r'webhook "(validatejob\.volcano\.sh|validate\.vgate\.io)" denied', reason), reason
        else:  # kinds this cluster does not serve (Argo, Ray, ...), fields no schema has: never sent to vgate
            assert any(why in reason for why in ("no matches for kind", "strict decoding error: unknown field",
                                                 "denied the request")), (source, reason)
    created = [source for source, result in outcomes.items() if result.ok]
    assert len(created) >= 30, refused
    assert {s for s in outcomes if s.startswith("invalid_jobs_")} <= set(refused)


def evaluate(recorded: dict[str, Any], with_volcano: bool) -> dict[str, dict[str, Any]]:
    """`vgate eval -o json` over the whole corpus, as a user would run it against this cluster."""
    workdir: Path = recorded["workdir"]
    manifests = workdir / "corpus.yaml"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {LABEL: "true"}}}
    reached = [(source, obj) for source, obj in recorded["objects"] if reached_webhooks(recorded, obj)
               and obj["kind"] not in MODEL_STATE]
    manifests.write_text(yaml.safe_dump_all([namespace, *(obj for _, obj in reached)]))
    volcano = charts.volcano_objects()
    crds = workdir / "volcano-crds.yaml"
    crds.write_text(yaml.safe_dump_all([o for o in volcano.cluster_setup if o["kind"] == "CustomResourceDefinition"]))
    admission = workdir / "volcano-admission.conf"
    admission.write_text(volcano.files["volcano-admission.conf"])
    args = [*cluster.VGATE_CLI, "eval", "-o", "json", "-f", str(manifests), "--namespace", NAMESPACE,
            "--config", str(cluster.VGATE_DIR / "vgate.yaml"), "--policies", str(cluster.VGATE_DIR / "policies"),
            "--crd", str(crds)]
    if with_volcano:
        args += ["--volcano-admission-config", str(admission)]
    done = subprocess.run(args, capture_output=True, text=True, cwd=cluster.ROOT)
    assert done.returncode in (0, 1), done.stderr
    verdicts = [v for v in json.loads(done.stdout) if not v["source"].endswith(CONTROLLER_MADE)]
    return dict(zip([source for source, _ in reached], verdicts, strict=True))


# Kinds eval takes as the cluster's state, judging none (a SparkApplication's ConfigMap, the Services
# and NetworkPolicies effective egress reads): they get no verdict of their own.
MODEL_STATE = ("ConfigMap", "Service", "NetworkPolicy", "Namespace", "Node", "PriorityClass")


# eval follows each admitted Volcano Job with the PodGroup its controller creates; its name has the
# Job's uid, which only the real cluster knows: test_a_jobs_pod_group_... compares those.
CONTROLLER_MADE = "(the PodGroup Volcano's job controller creates)"


def reached_webhooks(recorded: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Whether the API server sent the object to the webhooks at all (a namespaced kind it serves)."""
    recorder: Recorder = recorded["recorder"]
    return recorder.received("/delivered", obj["kind"], obj["metadata"].get("name", "")) is not None


def judged_by_vgate(verdict: dict[str, Any]) -> bool:
    """Whether vgate's validating webhook, as the chart registers it, matches the object's kind."""
    configuration = next(c for c in cluster.vgate_webhook_configurations()
                         if c["kind"] == "ValidatingWebhookConfiguration")
    group = verdict["object"]["apiVersion"].rpartition("/")[0]
    resource = verdict["kind"].lower() + "s"
    return any(group in rule["apiGroups"] and resource in rule["resources"]
               for rule in configuration["webhooks"][0]["rules"] if "CREATE" in rule["operations"])


def compare(recorded: dict[str, Any], with_volcano: bool) -> list[str]:
    """Each difference between the model and the real API server, one line each."""
    recorder: Recorder = recorded["recorder"]
    found = []
    for source, verdict in evaluate(recorded, with_volcano).items():
        kind, name = verdict["kind"], verdict["name"]
        real_delivered = recorder.received("/delivered", kind, name)
        real_final = recorder.received("/final", kind, name)
        if real_delivered is None:
            continue  # never reached the webhooks: refused earlier, or a kind the cluster lacks
        for stage, predicted, real in (("delivered", verdict.get("delivered"), real_delivered),
                                       ("final", verdict["object"], real_final)):
            if real is None:
                continue  # refused by a mutating webhook before validation (Volcano's invalid jobs)
            for path, want, got in differences(strip(predicted), strip(real)):
                found.append(f"{source} {kind}/{name} {stage} {path}: model {json.dumps(want)[:120]} "
                             f"real {json.dumps(got)[:120]}")
        # vgate's own verdict, from its decision log: another validating webhook (Volcano's, on the
        # invalid jobs) may refuse what vgate allowed, and kubectl then reports that refusal.
        real = [r["allowed"] for r in decisions_for(NAMESPACE, name, "validate")
                if r["operation"] == "CREATE" and r["kind"].endswith("/" + kind) and r["time"] >= recorded["since"]]
        if real_final is not None and judged_by_vgate(verdict) and real != [verdict["allowed"]]:
            found.append(f"{source} {kind}/{name} decision: model allowed={verdict['allowed']} real {real}")
    return found


def test_the_chain_model_with_volcano_predicts_what_the_api_server_delivers(recorded: dict[str, Any]) -> None:
    compared = [obj for _, obj in recorded["objects"] if reached_webhooks(recorded, obj)]
    assert len(compared) >= 25, len(compared)
    found = compare(recorded, with_volcano=True)
    assert not found, "\n".join(found)


def test_without_volcano_the_model_differs_only_where_volcanos_webhooks_change_objects(
        recorded: dict[str, Any]) -> None:
    found = compare(recorded, with_volcano=False)
    # Volcano's job mutator runs after vgate's first pass: it changes only what validation then sees.
    assert found and all(" Job/" in line and " final /spec/" in line for line in found), "\n".join(found)


# Quantities as users write them and the form the model says the API server serves them in.
QUANTITIES = {"1000m": "1", "0.5": "500m", "2048Mi": "2Gi", "1024Mi": "1Gi", "1000Mi": "1000Mi", "1500": "1500",
              "2000": "2k", "1.5Gi": "1536Mi", "0.5Gi": "512Mi", "100m": "100m", "1e3": "1e3", "12E6": "12E6",
              "0.5Ki": "512", "1.1": "1100m", "0.1n": "1m", "1500u": "2m", "1.5m": "2m", "4Gi": "4Gi", "1Ei": "1Ei",
              "1E3": "1E3", "0.500": "500m", ".5": "500m", "1.0": "1",
              "1.5E3": "1500", "1500E0": "1500E0", "1e-3": "1e-3", "0.5E3": "500", "3072Ki": "3Mi", "8Ki": "8Ki",
              "7Ki": "7Ki", "10Gi": "10Gi", "16Gi": "16Gi", "0100": "0100", "1000000": "1M", "12000k": "12M",
              "5E": "5E", "2P": "2P"}


def test_quantities_are_served_in_the_canonical_form_the_model_writes(kube: Kube) -> None:
    from webhook.core.quantity import canonical_quantity

    containers = [{"name": f"c{i}", "image": "registry.example.com/app:1",
                   "resources": {"requests": {"cpu": written}}} for i, written in enumerate(QUANTITIES)]
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "quantities"}, "spec": {"containers": containers}}
    result = kube.run("create", "-n", "kube-public", "--dry-run=server", "-o", "json", "-f", "-",
                      input_text=json.dumps(probe))
    assert result.ok, result.stderr
    served = [c["resources"]["requests"]["cpu"] for c in json.loads(result.stdout)["spec"]["containers"]]
    assert served == list(QUANTITIES.values())
    assert [canonical_quantity(written, round_up_to_milli=True) for written in QUANTITIES] == served


IMAGE = "registry.example.com/app:1"


def test_the_pod_group_volcanos_controller_creates_is_judged_by_eval_as_by_the_cluster(kube: Kube,
                                                                                       tmp_path: Path) -> None:
    """A Job without a queue in a namespace whose queue-name annotation names a queue. vgate watches
    namespaces, so the annotation gives the Job its queue (as Volcano's PodGroup mutator would give
    the PodGroup); the PodGroup Volcano's controller then creates carries it, and vgate admits it.
    `vgate eval` with the Namespace says the same of the same Job and PodGroup. A namespace annotated
    with a queue the config does not define: the Job itself is refused, in the cluster and by eval."""
    def annotated(queue: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": f"queue-annotated-{uuid.uuid4().hex[:5]}",
                             "annotations": {"scheduling.volcano.sh/queue-name": queue}}}

    def job(namespace: str) -> dict[str, Any]:
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": "stuck", "namespace": namespace},
                "spec": {"minAvailable": 1, "schedulerName": "volcano", "tasks": [{"name": "t", "replicas": 1,
                         "template": {"spec": {"containers": [{"name": "c", "image": IMAGE}]}}}]}}

    def queue_vgate_gives(namespace: str) -> str | None:
        """The queue of the Job as the API server would store it now (a dry run vgate answers too)."""
        done = kube.run("create", "--dry-run=server", "-o", "json", "-f", "-", input_text=json.dumps(job(namespace)))
        return json.loads(done.stdout)["spec"].get("queue") if done.ok else None

    def evaluated(*manifests: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
        path = tmp_path / f"{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(yaml.safe_dump_all(manifests))
        done = subprocess.run([*cluster.VGATE_CLI, "eval", "-o", "json", "-f", str(path), "--with-volcano",
                               "--config", str(cluster.VGATE_DIR / "vgate.yaml"), "--policies",
                               str(cluster.VGATE_DIR / "policies")], capture_output=True, text=True,
                              cwd=cluster.ROOT)
        return done.returncode, json.loads(done.stdout)

    batch = annotated("batch")
    namespace = batch["metadata"]["name"]
    assert kube.apply(batch).ok
    assert eventually(lambda: queue_vgate_gives(namespace) == "batch")  # once vgate's watch has the namespace
    created = kube.create(job(namespace))
    assert created.ok, created.stderr
    judged = eventually(lambda: [r for r in decisions_for(namespace) if r["kind"].endswith("/PodGroup")
                                 and r["endpoint"] == "validate" and r["operation"] == "CREATE"], timeout=60)
    assert judged and judged[0]["user"] == "system:serviceaccount:volcano-system:volcano-controllers"
    [stored] = eventually(lambda: kube.list("podgroups", namespace), timeout=30)
    code, (job_verdict, group_verdict) = evaluated(batch, job(namespace))
    assert code == 0 and job_verdict["allowed"] is True and group_verdict["source"].endswith(CONTROLLER_MADE)
    assert group_verdict["allowed"] is judged[0]["allowed"] is True
    assert group_verdict["object"]["spec"]["queue"] == stored["spec"]["queue"] == "batch"
    assert group_verdict["object"]["spec"]["minMember"] == stored["spec"]["minMember"] == 1

    nowhere = annotated("nowhere")
    elsewhere = nowhere["metadata"]["name"]
    assert kube.apply(nowhere).ok
    assert eventually(lambda: "nowhere" in kube.run("create", "--dry-run=server", "-f", "-",
                                                    input_text=json.dumps(job(elsewhere))).stderr)
    refused = kube.create(job(elsewhere))
    assert not refused.ok and "nowhere" in refused.stderr and kube.list("jobs.batch.volcano.sh", elsewhere) == []
    code, verdicts = evaluated(nowhere, job(elsewhere))
    [offline] = verdicts  # no PodGroup follows a refused Job
    assert code == 1 and offline["allowed"] is False and 'queue "nowhere"' in str(offline["violations"])
    assert {v["rule"] for v in offline["violations"] if v["action"] == "deny"} == {"scheduling-queue-allowed"}
