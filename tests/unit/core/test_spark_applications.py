"""Spark applications judged as their pods, mutated for Volcano, and Spark's executors judged with
their driver's classification (webhook/core/spark.py), with the shipped policies and config."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from test_write_paths import spark_application

from webhook.core.admission import decode_review
from webhook.core.errors import SparkSpecError
from webhook.core.kind_handler import KindContext, NoCluster
from webhook.core.mutation import mutate
from webhook.core.spark import container_resources, spark_mebibytes, spark_pods
from webhook.core.validation import validate

from helpers import RESTRICTED_SPEC, corpus_file, review

NOW = datetime(2026, 12, 3, tzinfo=timezone.utc)
ZONE = "topology.kubernetes.io/zone"
SEV = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
# spark-pi-prometheus.yaml is a template for the operator's docs ({IMAGE_REGISTRY}/... unquoted), not YAML.
EXAMPLES = [path for path in sorted(corpus_file("spark-operator", "examples", "spark-pi.yaml").parent.glob("*.yaml"))
            if path.name != "spark-pi-prometheus.yaml"]


@pytest.mark.parametrize(("size", "mib"), [("512m", 512), ("4g", 4096), ("4G", 4096), ("2048", 2048), (2048, 2048),
                                           ("1536k", 1), ("1t", 1048576), ("3gb", 3072)])
def test_spark_sizes_are_read_as_spark_reads_them(size, mib):
    assert spark_mebibytes(size, "spec.driver.memory") == mib


@pytest.mark.parametrize("size", ["4Gi", "512Mi", "1.5g", "", "lots", True, None, -1])
def test_a_size_spark_would_not_read_is_refused_naming_the_field(size):
    with pytest.raises(SparkSpecError, match=r"spec.driver.memory .* is not a size Spark reads: .* e\.g\. 512m or 4g"):
        spark_mebibytes(size, "spec.driver.memory")


def test_the_container_is_sized_as_spark_sizes_it():
    """memory + overhead as request and limit: 10% (JVM) or 40% (Python, R) of it, at least 384 MiB."""
    assert container_resources({}, {"memory": "512m", "cores": 1}, "spec.driver") == {
        "requests": {"cpu": "1", "memory": "896Mi"}, "limits": {"memory": "896Mi"}}
    assert container_resources({}, {"memory": "8g"}, "x")["requests"]["memory"] == f"{8192 + 819}Mi"
    assert container_resources({"type": "Python"}, {"memory": "8g"}, "x")["requests"]["memory"] == f"{8192 + 3276}Mi"
    assert container_resources({}, {"memory": "8g", "memoryOverhead": "1g", "coreLimit": "2"}, "x") == {
        "requests": {"cpu": "1", "memory": "9216Mi"}, "limits": {"memory": "9216Mi", "cpu": "2"}}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_of_the_operator_becomes_a_driver_and_an_executor(example):
    for document in yaml.safe_load_all(example.read_text()):
        if document and document.get("kind") in ("SparkApplication", "ScheduledSparkApplication"):
            (driver_where, driver), (executor_where, executor) = spark_pods(document, document["kind"])
            assert (driver_where, executor_where) == ("spec.driver", "spec.executor")
            assert driver["metadata"]["labels"]["spark-role"] == "driver"
            assert executor["metadata"]["labels"]["spark-role"] == "executor"
            assert driver["spec"]["containers"][0]["resources"]["limits"]["memory"].endswith("Mi")


def judged(obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None,
           inherited: dict[str, str] | None = None) -> Any:
    from webhook.files.config_file import load_config
    from webhook.policy.regorus_engine import RegorusEngine
    from webhook.policy.sources import load_policy_set

    from helpers import POLICIES

    config = load_config()
    engine = RegorusEngine(load_policy_set(POLICIES), config.document)
    body = review(obj, operation=operation, old_object=old)
    request = decode_review(orjson.dumps(body), 100)
    mutated = jsonpatch.apply_patch(obj, mutate(request, config).patch) if operation == "CREATE" else obj
    body = review(mutated, operation=operation, old_object=old)
    return validate(decode_review(orjson.dumps(body), 100), engine, config, (), NOW,
                    context=KindContext(inherited=inherited))


def sensitive(app: dict[str, Any], pinned: bool) -> dict[str, Any]:
    for role in ("driver", "executor"):
        app["spec"][role]["labels"] = dict(SENSITIVE)
    app["spec"]["image"] = "registry.example.com/spark@sha256:" + "9f86d081" * 8
    if pinned:
        app["spec"]["nodeSelector"] = {ZONE: "zone-a", SEV: "true"}
    return app


def test_a_compliant_application_is_admitted_and_a_sensitive_one_must_be_pinned():
    assert judged(spark_application()).decision.allowed
    assert judged(sensitive(spark_application(), pinned=True)).decision.allowed
    refused = judged(sensitive(spark_application(), pinned=False)).decision
    assert not refused.allowed
    assert "SparkApplication ml-training/etl spec.driver: " in refused.message
    assert "SparkApplication ml-training/etl spec.executor: " in refused.message
    assert "[placement-single-zone]" in refused.message and "[placement-encrypted-memory]" in refused.message


def test_a_privileged_executor_is_refused_naming_spec_executor():
    app = spark_application()
    app["spec"]["executor"]["securityContext"] = {"privileged": True}
    refused = judged(app).decision
    assert "[security-privileged-container] SparkApplication ml-training/etl spec.executor: " in refused.message
    assert "spec.driver: container" not in refused.message


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s["executor"].update(memory="4Gi"), "spec.executor.memory '4Gi' is not a size Spark reads"),
    (lambda s: s["driver"].update(memoryOverhead="512Mi"), "spec.driver.memoryOverhead '512Mi' is not a size"),
    (lambda s: s.pop("executor"), "spec.executor is missing"),
    (lambda s: s["executor"].update(instances=100_000), "it may run 100000 executors; the gateway judges at most"),
    (lambda s: s.update(dynamicAllocation={"enabled": True, "maxExecutors": 5_000}), "it may run 5000 executors"),
])
def test_bad_spark_specs_get_a_clear_refusal(change, message):
    app = spark_application()
    change(app["spec"])
    refused = judged(app)
    assert not refused.decision.allowed and message in refused.decision.message, refused.decision.message
    assert refused.decision.audit_annotations == {"refused": "spark-spec"}


def test_an_update_that_keeps_the_spec_is_not_judged_and_one_that_changes_it_is():
    app = sensitive(spark_application(), pinned=False)
    assert judged(app, "UPDATE", old=copy.deepcopy(app)).decision.allowed  # status, labels: not re-run
    before = spark_application()
    assert not judged(app, "UPDATE", old=before).decision.allowed


def test_mutation_puts_the_application_in_its_queue_on_volcano_and_is_idempotent():
    from webhook.files.config_file import load_config

    config = load_config()
    app = spark_application()
    del app["spec"]["batchScheduler"], app["spec"]["batchSchedulerOptions"], app["spec"]["driver"]["coreLimit"]
    mutation = mutate(decode_review(orjson.dumps(review(app)), 100), config)
    done = jsonpatch.apply_patch(app, mutation.patch)
    assert done["spec"]["batchScheduler"] == "volcano"
    assert done["spec"]["batchSchedulerOptions"] == {"queue": "training", "priorityClassName": "vgate-high"}
    assert done["spec"]["driver"]["coreLimit"] == "1" and "coreLimit" in mutation.warnings[0]
    again = mutate(decode_review(orjson.dumps(review(done)), 100), config)
    assert again.patch == []
    scheduled = spark_application("ScheduledSparkApplication")
    del scheduled["spec"]["template"]["batchSchedulerOptions"]
    request = decode_review(orjson.dumps(review(scheduled)), 100)
    patched = jsonpatch.apply_patch(scheduled, mutate(request, config).patch)
    assert patched["spec"]["template"]["batchSchedulerOptions"]["queue"] == "training"


def executor(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "etl-exec-1", "namespace": "ml-training", "labels": {"spark-role": "executor", **(labels or {})},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "etl-driver", "uid": "u"}]},
        "spec": {**copy.deepcopy(RESTRICTED_SPEC), "schedulerName": "volcano", **spec}}


def test_an_executor_of_a_sensitive_driver_is_judged_and_labelled_as_sensitive():
    from webhook.files.config_file import load_config

    inherited = dict(SENSITIVE)
    assert judged(executor()).decision.allowed  # on its own labels: not sensitive
    refused = judged(executor(), inherited=inherited).decision
    assert not refused.allowed and "[placement-single-zone]" in refused.message
    pinned = executor(nodeSelector={ZONE: "zone-a", SEV: "true"})
    pinned["spec"]["containers"][0]["image"] = "registry.example.com/spark@sha256:" + "9f86d081" * 8
    assert judged(pinned, inherited=inherited).decision.allowed  # held to what a sensitive pod must meet, and meets it
    request = decode_review(orjson.dumps(review(executor())), 100)
    patch = mutate(request, load_config(), KindContext(inherited=inherited)).patch
    labelled = jsonpatch.apply_patch(executor(), patch)
    assert labelled["metadata"]["labels"] == {"spark-role": "executor", **SENSITIVE}
    assert "labels" in labelled["metadata"]["annotations"]["vgate.io/injected"].split(",")


def test_vgate_eval_judges_an_executor_with_its_drivers_labels_as_the_server_does(tmp_path):
    """The driver given before its executors (as the server's cluster state holds it): an unpinned
    executor is refused (not in its driver's zone), a pinned one admitted and labelled. vgate eval judged both
    on their own labels before its context came from the registry's handler, as the server's does."""
    import subprocess

    from helpers import VGATE

    digest = "registry.example.com/spark@sha256:" + "9f86d081" * 8
    driver = executor(nodeSelector={ZONE: "zone-a", SEV: "true"})
    driver["metadata"] = {"name": "etl-driver", "namespace": "ml-training", "labels": {"spark-role": "driver",
                                                                                        **SENSITIVE}}
    pinned = executor(nodeSelector={ZONE: "zone-a", SEV: "true"})
    pinned["metadata"]["name"] = "etl-exec-2"
    for pod in (driver, pinned):
        pod["spec"]["containers"][0]["image"] = digest
    manifests = tmp_path / "spark-pods.yaml"
    manifests.write_text(yaml.safe_dump_all([driver, executor(), pinned]))
    result = subprocess.run([*VGATE, "eval", "-f", str(manifests), "-o", "json"], capture_output=True, text=True,
                            timeout=120)
    verdicts = json.loads(result.stdout)
    assert [v["allowed"] for v in verdicts] == [True, False, True], verdicts
    # unpinned where its driver is pinned to zone-a: one job, one zone (refused before the rules)
    assert "where its owner pod etl-driver is pinned to topology.kubernetes.io/zone=zone-a" in json.dumps(verdicts[1])
    labels = verdicts[2]["object"]["metadata"]["labels"]
    assert {key: labels[key] for key in SENSITIVE} == SENSITIVE


def test_vgate_eval_judges_every_operator_example_without_error():
    """The operator's examples, as written (namespace default, no labels): judged, never bad input."""
    import subprocess

    from helpers import VGATE

    def is_application(example: Any) -> bool:  # spark-connect.yaml is a SparkConnect server, no application
        documents = yaml.safe_load_all(example.read_text())
        return any((d or {}).get("kind", "").endswith("SparkApplication") for d in documents)

    applications = [example for example in EXAMPLES if is_application(example)]
    args = [arg for example in applications for arg in ("-f", str(example))]
    result = subprocess.run([*VGATE, "eval", *args, "-o", "json", "--namespace", "ml-training"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    verdicts = [v for v in json.loads(result.stdout) if v["kind"] in ("SparkApplication", "ScheduledSparkApplication")]
    assert len(verdicts) == len(applications) == len(EXAMPLES) - 1 and not [v for v in verdicts if v["error"]]
    volcano = next(v for v in verdicts if v["source"].startswith(str(EXAMPLES[0].parent / "spark-pi-volcano.yaml")))
    assert volcano["allowed"], volcano["violations"]


class Pods(NoCluster):
    """A cluster view holding the given pods and nothing else (ClusterView: what the gateway's cluster
    state answers about an executor's owners)."""

    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get((namespace, name))

    def holds_cluster(self) -> bool:
        return True


SENSITIVE_DRIVER = {"apiVersion": "v1", "kind": "Pod", "metadata": {
    "name": "etl-driver", "namespace": "ml-training", "labels": {"spark-role": "driver", **SENSITIVE}}}
INNOCENT = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "innocent", "namespace": "ml-training"}}


def judged_among(pod: dict[str, Any], view: Any, config_text: str = "") -> Any:
    """``pod`` judged by the server's path: its context from the view, by its registry entry."""
    from webhook.core.kinds import context_of
    from webhook.files.config_file import load_config, parse_config
    from webhook.policy.regorus_engine import RegorusEngine
    from webhook.policy.sources import load_policy_set

    from helpers import POLICIES

    config = parse_config(config_text) if config_text else load_config()
    request = decode_review(orjson.dumps(review(pod)), 100)
    engine = RegorusEngine(load_policy_set(POLICIES), config.document)
    return validate(request, engine, config, (), NOW, context=context_of(request, view, config))


def test_every_pod_owner_counts_not_only_the_first():
    """Spark appends its driver to a template's own owners: [innocent, driver] inherited nothing."""
    owned = executor()
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "innocent", "uid": "i"},
                                            {"apiVersion": "v1", "kind": "Pod", "name": "etl-driver", "uid": "u"}]
    refused = judged_among(owned, Pods(INNOCENT, SENSITIVE_DRIVER)).decision
    assert not refused.allowed and "[placement-single-zone]" in refused.message
    del owned["metadata"]["labels"]["spark-role"]  # a template that drops the role is still owned
    assert not judged_among(owned, Pods(INNOCENT, SENSITIVE_DRIVER)).decision.allowed


@pytest.mark.parametrize("label", [{"vgate.io/data-classification": "public"}, {"vgate.io/egress": "allow"}],
                         ids=["public", "egress-allow"])
def test_an_executor_contradicting_its_drivers_classification_is_refused_not_overridden(label):
    result = judged_among(executor(label), Pods(SENSITIVE_DRIVER))
    assert not result.decision.allowed and result.decision.audit_annotations == {"refused": "spark-spec"}
    key, value = next(iter(label.items()))
    assert f"it carries {key}={value} where its owner pod carries {key}=" in result.decision.message


def test_an_executor_whose_driver_is_not_known_yet_follows_the_failure_mode():
    """It was admitted as an ordinary pod (fail-open); now refused under failureMode deny, with the
    reason, and admitted with a warning under allow."""
    result = judged_among(executor(), Pods())
    assert not result.decision.allowed and result.decision.code == 500
    assert "its owner pod ml-training/etl-driver is not in vgate's cluster state" in result.decision.message
    allowed = judged_among(executor(), Pods(), "server: {failureMode: allow}\n")
    assert allowed.decision.allowed and "not in vgate's cluster state" in allowed.decision.warnings[0]
    assert judged_among(executor(), Pods(SENSITIVE_DRIVER)).error is None  # known: judged


def pinned_driver_only(app: dict[str, Any]) -> dict[str, Any]:
    """A sensitive application pinned through its driver alone (spec.driver.nodeSelector)."""
    sensitive(app, pinned=False)
    app["spec"]["driver"]["nodeSelector"] = {ZONE: "zone-a", SEV: "true"}
    return app


@pytest.mark.parametrize(("conf", "message"), [
    ({"spark.kubernetes.executor.node.selector.topology.kubernetes.io/zone": "zone-b",
      "spark.kubernetes.executor.node.selector." + SEV: "true"},
     "a sensitive Spark application runs in one zone: spec.driver to zone-a, spec.executor to zone-b"),
    ({"spark.kubernetes.executor.label.vgate.io/data-classification": "public"},
     "spec.executor carries vgate.io/data-classification=public where another role carries"),
    ({"spark.kubernetes.driver.podTemplateFile": "/opt/templates/driver.yaml"},
     "sparkConf spark.kubernetes.driver.podTemplateFile names a pod template file vgate cannot read"),
])
def test_spark_conf_is_read_as_spark_reads_it_and_the_job_is_one_unit(conf, message):
    """Issue 34: sparkConf's node selectors, labels and pod template files were not read; an executor
    pinned elsewhere by sparkConf (or relabelled public) made one Spark job two."""
    app = pinned_driver_only(spark_application())
    del app["spec"]["executor"]["labels"]  # the spec's own fields win over sparkConf (the operator's --conf last)
    app["spec"]["sparkConf"] = conf
    refused = judged(app)
    assert not refused.decision.allowed and message in refused.decision.message, refused.decision.message
    assert refused.decision.audit_annotations == {"refused": "spark-spec"}


def test_a_spark_config_maps_settings_are_read_under_spark_conf_and_a_missing_one_is_refused():
    """spark-defaults.conf from the sparkConfigMap, as Spark loads it, under sparkConf and the spec."""
    from webhook.core.kinds import context_of
    from webhook.files.config_file import load_config

    config = load_config()

    class Maps(Pods):
        def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
            text = ("# the team's defaults\n"
                    "spark.kubernetes.executor.node.selector.topology.kubernetes.io/zone zone-b\n"
                    "spark.kubernetes.executor.label.team=etl\n")
            return {"data": {"spark-defaults.conf": text}} if name == "etl-defaults" else None

    app = pinned_driver_only(spark_application())
    del app["spec"]["executor"]["labels"]
    app["spec"]["sparkConfigMap"] = "etl-defaults"
    request = decode_review(orjson.dumps(review(app)), 100)
    context = context_of(request, Maps(), config)
    assert context.spark_defaults == {
        "spark.kubernetes.executor.node.selector.topology.kubernetes.io/zone": "zone-b",
        "spark.kubernetes.executor.label.team": "etl"}
    refused = judged_with(app, context)
    assert "spec.executor to zone-b" in refused.decision.message, refused.decision.message
    app["spec"]["sparkConf"] = {"spark.kubernetes.executor.node.selector.topology.kubernetes.io/zone": "zone-a"}
    assert "zone-b" not in judged_with(app, context_of(request, Maps(), config)).decision.message  # sparkConf wins
    app["spec"]["sparkConfigMap"] = "missing"
    request = decode_review(orjson.dumps(review(app)), 100)
    missing = judged_with(app, context_of(request, Maps(), config)).decision
    assert "sparkConfigMap missing does not exist in ml-training" in missing.message
    assert missing.audit_annotations == {"refused": "spark-spec"}


def judged_with(app: dict[str, Any], context: Any) -> Any:
    from webhook.files.config_file import load_config
    from webhook.policy.regorus_engine import RegorusEngine
    from webhook.policy.sources import load_policy_set

    from helpers import POLICIES

    config = load_config()
    request = decode_review(orjson.dumps(review(app)), 100)
    return validate(request, RegorusEngine(load_policy_set(POLICIES), config.document), config, (), NOW,
                    context=context)


def test_a_driver_only_classification_makes_the_executors_sensitive_too():
    """The unit is sensitive if any role says so: executors unpinned are refused at the application,
    and /mutate writes the label to the executor role so the pods carry it."""
    app = sensitive(spark_application(), pinned=True)
    del app["spec"]["executor"]["labels"]
    assert judged(app).decision.allowed
    app["spec"].pop("nodeSelector")
    app["spec"]["driver"]["nodeSelector"] = {ZONE: "zone-a", SEV: "true"}
    refused = judged(app).decision
    assert "[placement-single-zone] SparkApplication ml-training/etl spec.executor" in refused.message or \
        "runs in one zone" in refused.message, refused.message
    body = review(app)
    from webhook.files.config_file import load_config
    patch = mutate(decode_review(orjson.dumps(body), 100), load_config()).patch
    assert {"op": "add", "path": "/spec/executor/labels", "value": SENSITIVE} in patch, patch


def test_spark_conf_the_model_does_not_read_is_said_and_the_image_it_names_is_judged():
    app = sensitive(spark_application(), pinned=True)
    app["spec"]["driver"]["image"] = app["spec"].pop("image")  # the executor's image: sparkConf's (no spec.image)
    app["spec"]["sparkConf"] = {"spark.kubernetes.executor.annotation.team": "etl",
                                "spark.sql.shuffle.partitions": "8",
                                "spark.kubernetes.executor.container.image": "registry.example.com/spark:latest"}
    result = judged(app).decision
    assert "sparkConf spark.kubernetes.executor.annotation.team is not judged by vgate" in " ".join(result.warnings)
    assert "spark.sql" not in " ".join(result.warnings)
    assert not result.allowed and "[supply-chain-image-registry] SparkApplication ml-training/etl spec.executor" \
        in result.message, result.message


def test_an_executor_pinned_to_another_zone_than_its_sensitive_driver_is_refused():
    """Issue 34: an executor of a zone-a driver pinned to zone-b was admitted, and bound to zone-b when
    there was no PodGroup to compare with. Both pins are immutable once the pods exist, so no
    interleaving of creates or bindings splits the job."""
    driver = copy.deepcopy(SENSITIVE_DRIVER)
    driver["spec"] = {"nodeSelector": {ZONE: "zone-a", SEV: "true"}}
    elsewhere = judged_among(executor(nodeSelector={ZONE: "zone-b", SEV: "true"}), Pods(driver)).decision
    assert not elsewhere.allowed and elsewhere.audit_annotations == {"refused": "spark-spec"}
    assert "topology.kubernetes.io/zone=zone-b where its owner pod etl-driver is pinned to " \
           "topology.kubernetes.io/zone=zone-a" in elsewhere.message, elsewhere.message
    together = judged_among(executor(nodeSelector={ZONE: "zone-a", SEV: "true"}), Pods(driver)).decision
    assert together.audit_annotations.get("refused") is None and "owner pod" not in together.message
    ordinary = {**driver, "metadata": {**driver["metadata"], "labels": {"spark-role": "driver"}}}
    assert "owner pod" not in judged_among(executor(nodeSelector={ZONE: "zone-b"}), Pods(ordinary)).decision.message


def test_the_specs_image_wins_over_spark_conf_as_the_operator_passes_it_last():
    """submission.go passes spec.image as spark.kubernetes.<role>.container.image after sparkConf's."""
    app = sensitive(spark_application(), pinned=True)
    app["spec"]["sparkConf"] = {"spark.kubernetes.executor.container.image": "docker.io/evil/miner:1"}
    [_, (_, executor_pod)] = spark_pods(app, "SparkApplication")
    assert executor_pod["spec"]["containers"][0]["image"] == app["spec"]["image"]
