"""Spark on Volcano through the real control plane, with real Spark: PyPI's pyspark ships
spark-submit and Spark's jars (Java 17 runs them), submitting to the e2e API server.

- cluster mode: spark-submit's own pod builder makes the driver pod, which goes through vgate;
- client mode: a real driver on this machine asks the API server for executor pods, which go through
  vgate; with ``spark.kubernetes.driver.pod.name`` naming a driver pod, Spark makes that pod their
  owner, and vgate judges them with its classification (they carry no label of their own);
- SparkApplications (the operator's CRD, installed from the operator's chart) judged as the pods
  the operator will create.

kwok's nodes "run" what is bound to them, so no Spark code runs in a pod: what is asserted is what
the API server stored or refused, and the decision log.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import cluster
from e2e.kube import Kube, decisions_for
from e2e.waiting import eventually

from helpers import CORPUS
from test_admission import TRAINING, unique
from test_admission import pod as ordinary_pod

SPARK_HOME = Path(importlib.util.find_spec("pyspark").origin or "").parent  # type: ignore[union-attr]
IMAGE = "registry.example.com/spark@sha256:" + "9f86d081" * 8
SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
VOLCANO_STEP = "org.apache.spark.deploy.k8s.features.VolcanoFeatureStep"
PINNED = {"topology.kubernetes.io/zone": "zone-a",
          "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"}


def confs(role: str, kind: str, values: dict[str, str]) -> list[str]:
    """--conf spark.kubernetes.<role>.<kind>.<key>=<value> for each (kind: label, node.selector)."""
    return [arg for key, value in values.items() for arg in ("--conf", f"spark.kubernetes.{role}.{kind}.{key}={value}")]


def submitter_kubeconfig(kube: Kube) -> Path:
    """A kubeconfig with the token of ServiceAccount ml-training/spark (edit in ml-training), as
    Spark's documentation sets it up; fabric8 reads it from KUBECONFIG. (The e2e admin's client key
    is PKCS#8 EC, which fabric8's key loader does not read.)"""
    path = cluster.RUN / "spark.kubeconfig"
    if path.is_file():
        return path
    kube.run("create", "serviceaccount", "spark", "-n", TRAINING)
    kube.run("create", "rolebinding", "spark-edit", "--clusterrole=edit", f"--serviceaccount={TRAINING}:spark",
             "-n", TRAINING)
    # Spark's Volcano feature step creates the application's PodGroup (edit does not cover Volcano's kinds)
    kube.run("create", "role", "spark-podgroups", "--verb=get,list,watch,create,update,patch,delete",
             "--resource=podgroups.scheduling.volcano.sh", "-n", TRAINING)
    kube.run("create", "rolebinding", "spark-podgroups", "--role=spark-podgroups",
             f"--serviceaccount={TRAINING}:spark", "-n", TRAINING)
    token = kube.run("create", "token", "spark", "-n", TRAINING, "--duration=24h")
    assert token.ok, token.stderr
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "spark",
        "clusters": [{"name": "e2e", "cluster": {"server": cluster.APISERVER,
                                                 "certificate-authority": str(cluster.RUN / "pki" / "ca.crt")}}],
        "users": [{"name": "spark", "user": {"token": token.stdout.strip()}}],
        "contexts": [{"name": "spark", "context": {"cluster": "e2e", "user": "spark", "namespace": TRAINING}}]}))
    return path


def spark_submit(name: str, mode: str, *extra: str) -> subprocess.Popen[str]:
    """spark-submit of Spark's own pi.py to the e2e API server, as ServiceAccount ml-training/spark."""
    submit = SPARK_HOME / "bin" / "spark-submit"
    assert submit.is_file(), "pyspark (the test extra) ships spark-submit"
    assert shutil.which("java"), "spark-submit needs a Java 17 runtime"
    command = [str(submit), "--master", f"k8s://{cluster.APISERVER}", "--deploy-mode", mode, "--name", name,
               "--conf", f"spark.kubernetes.namespace={TRAINING}",
               "--conf", "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
               "--conf", f"spark.kubernetes.container.image={IMAGE}",
               "--conf", "spark.kubernetes.submission.waitAppCompletion=false",
               "--conf", "spark.kubernetes.scheduler.name=volcano",
               "--conf", "spark.executor.instances=2", "--conf", "spark.kubernetes.allocation.batch.size=2",
               "--conf", f"spark.kubernetes.executor.podNamePrefix={name}",
               *extra, "local:///opt/spark/examples/src/main/python/pi.py" if mode == "cluster"
               else str(SPARK_HOME / "examples" / "src" / "main" / "python" / "pi.py")]
    env = {**os.environ, "KUBECONFIG": str(submitter_kubeconfig(Kube())), "SPARK_HOME": str(SPARK_HOME),
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def finished(process: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str]:
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    return process.returncode, output


@pytest.fixture
def client_mode() -> Iterator[Any]:
    """Runs spark-submit in client mode (a real driver here), stopped after the test."""
    running: list[subprocess.Popen[str]] = []

    def start(name: str, *extra: str) -> subprocess.Popen[str]:
        running.append(spark_submit(name, "client", "--conf", "spark.driver.host=127.0.0.1", *extra))
        return running[-1]

    yield start
    for process in running:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


def pods_of(kube: Kube, app: str) -> list[dict[str, Any]]:
    return [p for p in kube.list("pods", TRAINING) if p["metadata"]["name"].startswith(app)]


def test_cluster_mode_a_sensitive_driver_without_a_zone_is_refused_with_vgates_reasons(kube: Kube) -> None:
    name = unique("spark-unpinned")
    code, output = finished(spark_submit(name, "cluster", *confs("driver", "label", SENSITIVE)))
    assert code != 0, output
    assert 'admission webhook "validate.vgate.io" denied the request' in output, output[-3000:]
    assert "[placement-single-zone]" in output and "[placement-encrypted-memory]" in output
    refused = eventually(lambda: [r for r in decisions_for(TRAINING, endpoint="validate")
                                  if r["kind"] == "v1/Pod" and r["name"].startswith(name) and not r["allowed"]])
    assert refused and not [p for p in pods_of(kube, name)]


def test_cluster_mode_a_sensitive_driver_meeting_the_constraints_is_stored_and_placed(kube: Kube) -> None:
    name = unique("spark-pinned")
    code, output = finished(spark_submit(name, "cluster", *confs("driver", "label", SENSITIVE),
                                         *confs("driver", "node.selector", PINNED)))
    assert code == 0, output[-3000:]
    [driver] = eventually(lambda: pods_of(kube, name))
    assert driver["metadata"]["labels"]["spark-role"] == "driver"
    assert driver["spec"]["schedulerName"] == "volcano" and driver["spec"]["nodeSelector"] == PINNED
    placed = eventually(lambda: (kube.get("pod", driver["metadata"]["name"], TRAINING) or {})["spec"].get("nodeName"),
                        timeout=60)
    assert placed in ("zone-a-sev-1", "zone-a-sev-2")  # by Volcano's scheduler, the binding judged by vgate


def driver_pod(kube: Kube, name: str) -> str:
    """A sensitive, pinned pod standing for a driver (as a Spark driver in a pod is): its executors'
    owner. Created through vgate, and bound by Volcano."""
    labels = {**SENSITIVE, "spark-role": "driver"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
           "spec": {"schedulerName": "volcano", "nodeSelector": PINNED,
                    "containers": [{"name": "spark-kubernetes-driver", "image": IMAGE}]}}
    result = kube.create(pod, namespace=TRAINING)
    assert result.ok, result.stderr
    assert eventually(lambda: (kube.get("pod", name, TRAINING) or {})["spec"].get("nodeName"), timeout=60)
    return name


def test_client_mode_executors_of_a_sensitive_driver_are_judged_as_sensitive(kube: Kube, client_mode: Any) -> None:
    """The executors carry no label; their owner, the driver pod, is sensitive and pinned: without its
    zone they are refused (Spark keeps asking), and none is stored."""
    driver = driver_pod(kube, unique("spark-driver"))
    name = unique("spark-exec-unpinned")
    process = client_mode(name, "--conf", f"spark.kubernetes.driver.pod.name={driver}")
    refused = eventually(lambda: [r for r in decisions_for(TRAINING, endpoint="validate")
                                  if r["name"].startswith(name) and not r["allowed"]], timeout=150)
    assert refused, "no executor reached vgate"
    # unpinned where its driver is pinned: outside its driver's zone (before the rules: refused spark-spec)
    assert f"where its owner pod {driver} is pinned to topology.kubernetes.io/zone=zone-a" in refused[0]["message"]
    # /mutate gave the executor its driver's labels (recorded as inherited), which validation judged
    [labelled] = [r for r in decisions_for(TRAINING, refused[0]["name"], "mutate")][:1]
    assert labelled["inherited"] == SENSITIVE
    assert process.poll() is None or process.returncode != 0
    assert not pods_of(kube, name)


def owned_by(kube: Kube, name: str, owners: list[str], **labels: str) -> dict[str, Any]:
    """A pod as Spark makes an executor (unpinned, no classification of its own unless ``labels``),
    owned by the pods named, in that order."""
    references = []
    for owner in owners:
        uid = ((kube.get("pod", owner, TRAINING) or {}).get("metadata") or {}).get("uid") or "0" * 8
        references.append({"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": uid})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "labels": {"spark-role": "executor", **labels}, "ownerReferences": references},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "spark-kubernetes-executor", "image": IMAGE}]}}


def test_an_executor_is_its_drivers_whatever_its_owners_order_its_own_labels_or_the_watch_say(kube: Kube) -> None:
    """Issue 34's owner bypasses, each admitted before: owners [an ordinary pod, the sensitive driver]
    inherited nothing; an executor labelled public (or egress allow) kept its label; an executor of a
    driver vgate has not seen was judged as an ordinary pod; an executor pinned to zone-b beside its
    zone-a driver was admitted and bound there. Now: refused as outside its sensitive driver's zone,
    refused as contradicting its driver, refused per server.failureMode (deny)."""
    driver = driver_pod(kube, unique("owners-driver"))
    ordinary = unique("owners-ordinary")
    assert kube.create(ordinary_pod(ordinary), namespace=TRAINING).ok
    assert eventually(lambda: kube.get("pod", ordinary, TRAINING))
    second = kube.create(owned_by(kube, unique("exec-second"), [ordinary, driver]), namespace=TRAINING)
    assert not second.ok and f"where its owner pod {driver} is pinned to topology.kubernetes.io/zone=zone-a" \
        in second.stderr, second.stderr  # unpinned, where its (sensitive) driver is pinned: not its driver's zone
    elsewhere = owned_by(kube, unique("exec-zone-b"), [driver])
    elsewhere["spec"]["nodeSelector"] = {**PINNED, "topology.kubernetes.io/zone": "zone-b"}
    refused = kube.create(elsewhere, namespace=TRAINING)  # one Spark job in two datacenters, without a PodGroup
    assert not refused.ok and "topology.kubernetes.io/zone=zone-b where its owner pod" in refused.stderr, \
        refused.stderr
    for label in ({"vgate.io/data-classification": "public"}, {"vgate.io/egress": "allow"}):
        contrary = kube.create(owned_by(kube, unique("exec-contrary"), [driver], **label), namespace=TRAINING)
        assert not contrary.ok and "where its owner pod carries" in contrary.stderr, contrary.stderr
    unseen = kube.create(owned_by(kube, unique("exec-unseen"), [unique("no-such-driver")]), namespace=TRAINING)
    assert not unseen.ok and "is not in vgate's cluster state" in unseen.stderr, unseen.stderr


def test_client_mode_pinned_executors_are_stored_labelled_with_their_drivers_classification(
        kube: Kube, client_mode: Any) -> None:
    driver = driver_pod(kube, unique("spark-driver"))
    name = unique("spark-exec-pinned")
    client_mode(name, "--conf", f"spark.kubernetes.driver.pod.name={driver}",
                *confs("executor", "node.selector", PINNED))
    executors = eventually(lambda: pods_of(kube, name), timeout=150)
    assert executors, "no executor stored"
    for executor in executors:
        labels = executor["metadata"]["labels"]
        assert labels["spark-role"] == "executor" and {k: labels[k] for k in SENSITIVE} == SENSITIVE  # by /mutate
        assert executor["metadata"]["ownerReferences"][0]["name"] == driver


@pytest.fixture(scope="module")
def spark_crds(control_plane: Kube) -> None:
    """The operator's CRDs (from its chart, at the commit ../shared/corpus/SOURCES names), installed."""
    folder = CORPUS / "spark-operator" / "crds"
    for path in sorted(folder.glob("*.yaml")):
        result = control_plane.run("apply", "--server-side", "-f", str(path))
        assert result.ok, result.stderr
    cluster.wait_established(["sparkapplications.sparkoperator.k8s.io",
                              "scheduledsparkapplications.sparkoperator.k8s.io"])


def application(name: str, **driver: Any) -> dict[str, Any]:
    [example] = [d for d in yaml.safe_load_all((CORPUS / "spark-operator" / "examples" / "spark-pi-volcano.yaml")
                                              .read_text()) if d]
    example["metadata"] = {"name": name}
    example["spec"]["driver"].update(driver)
    example["spec"].pop("batchSchedulerOptions", None)
    return example


def test_the_operators_volcano_example_is_mutated_into_its_queue(kube: Kube, spark_crds: None) -> None:
    name = unique("spark-pi")
    result = kube.create(application(name), namespace=TRAINING)
    assert result.ok, result.stderr
    stored = kube.get("sparkapplications.sparkoperator.k8s.io", name, TRAINING) or {}
    assert stored["spec"]["batchScheduler"] == "volcano"
    assert stored["spec"]["batchSchedulerOptions"] == {"queue": "training", "priorityClassName": "vgate-high"}
    assert stored["spec"]["executor"]["coreLimit"] == "1"  # training is Guaranteed: its cores as its limit


def test_a_sensitive_application_without_a_zone_and_a_bad_size_are_refused(kube: Kube, spark_crds: None) -> None:
    result = kube.create(application(unique("spark-sensitive"), labels=SENSITIVE), namespace=TRAINING)
    assert not result.ok and "spec.driver: " in result.stderr and "[placement-single-zone]" in result.stderr, \
        result.stderr
    result = kube.create(application(unique("spark-gi"), memory="4Gi"), namespace=TRAINING)
    assert not result.ok and "spec.driver.memory '4Gi' is not a size Spark reads" in result.stderr, result.stderr
    refused = [r for r in decisions_for(TRAINING, endpoint="validate")
               if r["kind"].endswith("/SparkApplication") and not r["allowed"]]
    assert len(refused) >= 2


def test_an_application_with_more_containers_than_judged_is_refused_and_recorded(kube: Kube,
                                                                                spark_crds: None) -> None:
    """server.maxContainersPerPod bounds a SparkApplication's pods as it bounds a Pod: 256 sidecars on
    the driver (its container and 256 more) are refused before any rule runs, and not mutated (they
    passed before the registry's handler named the application's pod specs)."""
    name = unique("spark-wide")
    sidecars = [{"name": f"sidecar-{index}", "image": IMAGE} for index in range(256)]
    result = kube.create(application(name, sidecars=sidecars), namespace=TRAINING)
    assert not result.ok and "spec.driver has 257 containers; the gateway judges at most 256" in result.stderr, \
        result.stderr
    [refused] = [r for r in decisions_for(TRAINING, name, "validate") if r["kind"].endswith("/SparkApplication")]
    assert not refused["allowed"] and "(server.maxContainersPerPod)" in refused["message"]
    [mutation] = decisions_for(TRAINING, name, "mutate")
    assert mutation["decision"] == "allowed" and not mutation.get("patch")


def test_sparks_own_pod_group_is_judged_as_volcano_pod_groups_are(kube: Kube, tmp_path: Path) -> None:
    """Spark's Volcano feature step (in pyspark's jars) has spark-submit create a PodGroup from a
    template before the driver: one naming a queue ml-training may not use is refused, and Spark
    stops there; one in its own queue is stored."""
    for queue, admitted in (("inference", False), ("training", True)):
        template = tmp_path / f"{queue}.yaml"
        template.write_text(yaml.safe_dump({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                            "spec": {"queue": queue, "minMember": 1}}))
        name = unique(f"spark-pg-{queue}")
        code, output = finished(spark_submit(
            name, "cluster", *confs("driver", "label", {"app": name}),
            "--conf", f"spark.kubernetes.driver.pod.featureSteps={VOLCANO_STEP}",
            "--conf", f"spark.kubernetes.scheduler.volcano.podGroupTemplateFile={template}"))
        groups = [r for r in decisions_for(TRAINING, endpoint="validate") if r["kind"].endswith("/PodGroup")
                  and r["user"] == f"system:serviceaccount:{TRAINING}:spark"]
        assert groups, output[-2000:]
        if admitted:
            assert code == 0 and groups[-1]["allowed"], output[-2000:]
        else:
            assert code != 0 and "[scheduling-queue-allowed]" in output, output[-2000:]
            assert not groups[-1]["allowed"]


@pytest.mark.parametrize(("conf", "answer"), [
    ({"spark.kubernetes.executor.node.selector.topology.kubernetes.io/zone": "zone-b"},
     "a sensitive Spark application runs in one zone: spec.driver to zone-a, spec.executor to zone-b"),
    ({"spark.kubernetes.executor.label.vgate.io/data-classification": "public"},
     "spec.executor carries vgate.io/data-classification=public where another role carries"),
    ({"spark.kubernetes.executor.podTemplateFile": "/opt/spark/executor.yaml"},
     "names a pod template file vgate cannot read at admission"),
], ids=["executor-zone-b", "executor-public", "pod-template-file"])
def test_spark_conf_cannot_take_a_sensitive_jobs_executors_elsewhere(kube: Kube, spark_crds: None,
                                                                      conf: dict[str, str], answer: str) -> None:
    """Issue 34: sparkConf was not read, so the executors of a sensitive driver pinned to zone-a could be
    sent to zone-b, relabelled public or built from a template file vgate never saw."""
    app = application(unique("spark-conf"), labels=SENSITIVE, nodeSelector={
        "topology.kubernetes.io/zone": "zone-a", "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"})
    app["spec"]["sparkConf"] = {**(app["spec"].get("sparkConf") or {}), **conf}
    result = kube.create(app, namespace=TRAINING)
    assert not result.ok and answer in result.stderr, result.stderr


def test_a_spark_config_map_is_read_a_missing_one_refused_and_unread_spark_conf_said(kube: Kube,
                                                                                      spark_crds: None) -> None:
    """Issue 34: a sparkConfigMap was never read. Its spark-defaults.conf (read by name, as the operator
    mounts it for spark-submit) pins a sensitive job's executors to zone-b: refused; one that does not
    exist: refused with its name."""
    defaults = unique("etl-defaults")
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": defaults}, "data": {
        "spark-defaults.conf": "spark.kubernetes.executor.node.selector.topology.kubernetes.io/zone zone-b\n"}}
    assert kube.create(config_map, namespace=TRAINING).ok
    app = application(unique("spark-cm"), labels=SENSITIVE, nodeSelector={
        "topology.kubernetes.io/zone": "zone-a", "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"})
    app["spec"]["sparkConfigMap"] = defaults
    result = kube.create(app, namespace=TRAINING)
    assert not result.ok and "spec.driver to zone-a, spec.executor to zone-b" in result.stderr, result.stderr
    app = application(unique("spark-cm"))
    app["spec"]["sparkConfigMap"] = "no-such-defaults"
    result = kube.create(app, namespace=TRAINING)
    assert not result.ok and "sparkConfigMap no-such-defaults does not exist in ml-training" in result.stderr
    app = application(unique("spark-warned"))
    app["spec"]["sparkConf"] = {"spark.kubernetes.executor.annotation.team": "etl"}
    result = kube.create(app, namespace=TRAINING)
    assert result.ok, result.stderr
    assert "sparkConf spark.kubernetes.executor.annotation.team is not judged by vgate" in result.stderr
