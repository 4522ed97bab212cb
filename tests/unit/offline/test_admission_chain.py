"""vgate in a modelled admission chain: objects as the API server and Volcano's webhooks deliver them.

Each of the failures measured in the issue is a test here; the corpus runs through the model with
and without Volcano's webhooks, and the model itself is checked against real sources (Volcano's
CRDs, Kubernetes' round-trip fixtures, the Kubernetes OpenAPI schema).
"""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any

import jsonpatch
import kubernetes_validate
import orjson
import pytest
import yaml

from webhook.core.admission import decode_review
from webhook.core.mutation import mutate
from webhook.files.config_file import parse_config
from webhook.offline.admit import admit, review_for
from webhook.offline.chain.core_defaults import default_pod, image_tag
from webhook.offline.chain.crd_defaults import apply_defaults, read_crd_file, shipped_crds
from webhook.offline.chain.model import Cluster, deliver
from webhook.offline.chain.volcano import read_admission_config
from webhook.policy.regorus_engine import RegorusEngine
from webhook.policy.sources import load_policy_set

from corpus import corpus_pods, corpus_volcano_jobs, fixture_pod
from helpers import K8S_VERSION, POLICIES, VGATE, corpus_file, crd_validator, is_strictly_valid, pod, shipped_config

RESOURCE_GROUPS = [{"resourceGroup": "cpu", "object": {"key": "namespace", "value": ["ml-training"]},
                    "schedulerName": "default-scheduler", "labels": {"vgate.io/node-pool": "cpu"}}]


def config_with(**sections: Any):
    """The shipped config with some sections changed, and an engine whose policies see it."""
    config = parse_config(shipped_config(**sections))
    return config, RegorusEngine(load_policy_set(POLICIES), config.document)


def through_chain(obj: dict[str, Any], config, engine, *, namespaces: list[dict[str, Any]] = (),
                  with_volcano: bool = False, namespace: str | None = None):
    cluster = Cluster.build(config, with_volcano=with_volcano, resource_groups=RESOURCE_GROUPS)
    for manifest in namespaces:
        cluster.learn(manifest)
    return admit(obj, config, engine, cluster=cluster, namespace=namespace)


def namespace_object(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}}


def vgate_mutator(config, namespace: str):
    def run(obj: dict[str, Any]) -> list[dict[str, Any]]:
        return mutate(decode_review(orjson.dumps(review_for(obj, namespace=namespace)), 100), config).patch
    return run


# The failures the issue measured, one test each.

def test_a_crd_defaulted_queue_gets_the_namespaces_queue_and_class(config, engine):
    job = copy.deepcopy(dict(corpus_volcano_jobs())["job.yaml#0"])
    del job["spec"]["queue"]  # as a user writes it: the CRD default fills it in
    result = through_chain(job, config, engine, namespace="ml-training")
    defaulting = result.delivery.steps[0]
    assert defaulting.name == "API server defaulting"
    assert {"op": "add", "path": "/spec/queue", "value": "default"} in defaulting.patch
    assert (result.mutated["spec"]["queue"], result.mutated["spec"]["priorityClassName"]) == ("training", "vgate-high")
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "pg"}, "spec": {"minMember": 1}}
    result = through_chain(group, config, engine, namespace="ml-inference")
    assert (result.mutated["spec"]["queue"], result.mutated["spec"]["priorityClassName"]) == (
        "inference",
        "vgate-critical",
    )
    assert result.validation.decision.allowed


def test_platform_pods_are_left_alone(config, engine):
    scheduler = pod("volcano-scheduler-0", "volcano-system", priorityClassName="system-cluster-critical")
    result = through_chain(scheduler, config, engine)
    assert result.validation.decision.allowed and result.validation.exempt
    assert result.mutated["spec"]["schedulerName"] == "default-scheduler" and result.mutation.patch == []
    device_plugin = pod(
        "nvidia-device-plugin-x",
        "gpu-operator",
        hostPID=True,
        priorityClassName="system-node-critical",
        containers=[
            {
                "name": "plugin",
                "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                "securityContext": {"privileged": True},
            }
        ],
    )
    assert not through_chain(device_plugin, config, engine).validation.decision.allowed
    exempt = namespace_object("gpu-operator", labels={"vgate.io/exempt": "true"})
    result = through_chain(device_plugin, config, engine, namespaces=[exempt])
    assert result.validation.decision.allowed and not result.delivery.vgate_called
    exporter = pod("node-exporter-x", "monitoring", priorityClassName="system-node-critical")
    result = through_chain(exporter, config, engine)
    assert "scheduling-priority-class-allowed" not in {o.rule for o in result.validation.outcomes}
    assert (result.mutated["spec"]["priorityClassName"], result.mutated["spec"]["priority"]) == (
        "system-node-critical",
        2000001000,
    )


def test_reinvocation_keeps_the_scheduler_volcanos_resource_group_chose(config, engine):
    allowing, allowing_engine = config_with(volcano={"allowedSchedulers": ["default-scheduler"]})
    result = through_chain(pod("trainer", "ml-training"), allowing, allowing_engine, with_volcano=True)
    names = [step.name for step in result.delivery.steps]
    assert "webhook mutatepod.volcano.sh" in names
    assert result.mutated["spec"]["schedulerName"] == "default-scheduler"
    assert result.mutated["spec"]["nodeSelector"] == {"vgate.io/node-pool": "cpu"}
    assert not any("reinvoked" in name for name in names), "vgate's second pass changed something"
    assert result.validation.decision.allowed, result.validation.decision.message
    strict = through_chain(pod("trainer", "ml-training"), config, engine, with_volcano=True)
    assert strict.mutated["spec"]["schedulerName"] == "default-scheduler"  # vgate leaves it either way...
    assert [o.rule for o in strict.validation.rules("deny")] == ["scheduling-volcano-scheduler"]  # ...and says so


def test_a_queue_volcano_took_from_the_namespace(config, engine):
    team = namespace_object("team-a", annotations={"scheduling.volcano.sh/queue-name": "team-q"})
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"minMember": 1},
    }
    unknown = through_chain(group, config, engine, namespaces=[team], with_volcano=True, namespace="team-a")
    assert unknown.mutated["spec"]["queue"] == "team-q"
    denial = unknown.validation.decision.message
    assert "scheduling-queue-allowed" in denial and "mapped in queues.byNamespace" in denial
    mirrored, mirrored_engine = config_with(
        queues={
            "byNamespace": {"team-a": "team-q"},
            "bySelector": [],
            "definitions": {"default": {}, "team-q": {"namespaces": ["team-a"]}},
        }
    )
    known = through_chain(group, mirrored, mirrored_engine, namespaces=[team], with_volcano=True, namespace="team-a")
    assert known.mutated["spec"]["queue"] == "team-q" and known.validation.decision.allowed
    assert [s.name for s in known.delivery.steps if "volcano" in s.name] == []  # Volcano found a queue chosen


def test_eval_denies_a_deployment_whose_pods_would_be_denied(tmp_path):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "registry.example.com/app:1", "securityContext": {"privileged": True}}
                    ]
                },
            },
        },
    }
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(yaml.safe_dump(deployment))
    result = vgate_eval("-f", str(manifest))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "DENIED  Deployment web/web" in result.stdout
    assert '[security-privileged-container] Deployment web: privileged (container "app" must not set' in result.stdout
    assert "imagePullPolicy" in result.stdout  # the template was defaulted before it was judged


# The corpus through the model.


def corpus_pod_groups() -> list[tuple[str, dict[str, Any]]]:
    """The PodGroup Volcano's job controller creates for each corpus Job (the corpus's one PodGroup is
    of kube-batch's old scheduling.incubator.k8s.io API, which neither Volcano nor vgate serves)."""
    groups = []
    for where, job in corpus_volcano_jobs():
        spec = job.get("spec") or {}
        groups.append(
            (
                where + "/podgroup",
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": f"{job['metadata']['name']}-0123"},
                    "spec": {key: spec[key] for key in ("queue", "priorityClassName") if key in spec}
                    | {"minMember": spec.get("minAvailable", 1)},
                },
            )
        )
    assert len(groups) > 20
    return groups


CORPUS = [*corpus_pods(), *corpus_volcano_jobs(), *corpus_pod_groups()]


@pytest.mark.parametrize("with_volcano", [False, True], ids=["vgate", "vgate+volcano"])
@pytest.mark.parametrize("where,source", CORPUS, ids=lambda v: v if isinstance(v, str) else "")
def test_corpus_as_delivered_stays_valid_idempotent_and_reinvocation_stable(config, where, source, with_volcano):
    cluster = Cluster.build(config, with_volcano=with_volcano, resource_groups=RESOURCE_GROUPS)
    delivery = deliver(source, "ml-training", "CREATE", cluster, vgate_mutator(config, "ml-training"))
    assert delivery.refused is None and delivery.steps
    assert not any("reinvoked" in step.name for step in delivery.steps), "vgate -> Volcano -> vgate changed more"
    assert vgate_mutator(config, "ml-training")(delivery.final) == [], "not idempotent on the chain's output"
    final = delivery.final
    if final["kind"] == "Pod":
        assert is_strictly_valid(final) or not is_strictly_valid(source), where
        kubernetes_validate.validate(final, K8S_VERSION, strict=False)
    else:
        crd_validator(
            {"Job": "batch.volcano.sh_jobs.yaml", "PodGroup": "scheduling.volcano.sh_podgroups.yaml"}[final["kind"]]
        ).validate(final)
        written = source["spec"].get("queue")
        assert final["spec"]["queue"] == (written if written not in (None, "", "default") else "training")


# The model, against real sources.


def test_shipped_crd_defaults_are_what_volcanos_and_the_spark_operators_crds_say():
    from_corpus = [
        crd
        for folder in (corpus_file("volcano-crds", "batch.volcano.sh_jobs.yaml").parent,
                       corpus_file("spark-operator", "crds", "sparkoperator.k8s.io_sparkapplications.yaml").parent)
        for path in sorted(folder.glob("*.yaml"))
        for crd in read_crd_file(path)
    ]
    assert [c.as_json() for c in shipped_crds()] == [c.as_json() for c in from_corpus]
    assert {c.kind for c in shipped_crds()} >= {"SparkApplication", "ScheduledSparkApplication"}


def test_structural_defaulting_follows_the_api_servers_algorithm():
    schema = {
        "properties": {
            "spec": {
                "properties": {
                    "queue": {"default": "default"},
                    "mode": {"default": "hard", "nullable": True},
                    "tasks": {
                        "items": {"properties": {"ports": {"items": {"properties": {"protocol": {"default": "TCP"}}}}}}
                    },
                }
            }
        }
    }
    obj = {"spec": {"mode": None, "tasks": [{"ports": [{"containerPort": 80}, {"protocol": "UDP"}]}]}}
    apply_defaults(obj, schema)
    assert obj == {
        "spec": {
            "queue": "default",
            "mode": None,
            "tasks": [{"ports": [{"containerPort": 80, "protocol": "TCP"}, {"protocol": "UDP"}]}],
        }
    }
    not_nullable = {"spec": {"queue": None}}
    apply_defaults(not_nullable, schema)
    assert not_nullable["spec"]["queue"] == "default"  # a null where null is not allowed is defaulted


def test_built_in_defaults_never_change_what_is_set_and_give_a_valid_pod():
    every_field = fixture_pod()
    defaulted = copy.deepcopy(every_field)
    default_pod(defaulted)
    assert all(op["op"] == "add" for op in jsonpatch.make_patch(every_field, defaulted).patch)
    for where, source in corpus_pods():
        pod_object = copy.deepcopy(source)
        default_pod(pod_object)
        assert is_strictly_valid(pod_object) or not is_strictly_valid(source), where


def test_a_minimal_pod_is_delivered_as_a_real_api_server_serves_it(config):
    """The fields `kubectl create --dry-run=server -o yaml` shows for `kubectl run nginx --image=nginx`."""
    cluster = Cluster.build(config)
    minimal = pod("nginx", "web", containers=[{"name": "nginx", "image": "nginx"}])
    spec = deliver(minimal, "web", "CREATE", cluster, lambda obj: []).delivered["spec"]
    assert {k: v for k, v in spec.items() if k not in ("containers", "volumes", "tolerations")} == {
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
    }
    container = spec["containers"][0]
    assert (
        container["imagePullPolicy"],
        container["terminationMessagePath"],
        container["terminationMessagePolicy"],
        container["resources"],
    ) == ("Always", "/dev/termination-log", "File", {})
    (mount,) = container["volumeMounts"]
    assert mount == {
        "name": spec["volumes"][0]["name"],
        "readOnly": True,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
    }
    assert spec["volumes"][0]["name"].startswith("kube-api-access-") and len(spec["volumes"][0]["name"]) == 21
    assert [(t["key"], t["effect"], t["tolerationSeconds"]) for t in spec["tolerations"]] == [
        ("node.kubernetes.io/not-ready", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "NoExecute", 300),
    ]


@pytest.mark.parametrize(
    "image,tag",
    [
        ("nginx", "latest"),
        ("nginx:1.27", "1.27"),
        ("reg:5000/app", "latest"),
        ("reg:5000/app:2", "2"),
        ("app@sha256:" + "a" * 64, ""),
        ("app:1@sha256:" + "a" * 64, "1"),
    ],
)
def test_image_pull_policy_reads_tags_as_kubernetes_does(image, tag):
    assert image_tag(image) == tag


def test_the_priority_plugin_refuses_what_the_api_server_refuses(config, engine):
    unknown = through_chain(pod(priorityClassName="gold"), config, engine)
    assert not unknown.validation.decision.allowed
    assert "no PriorityClass with name gold was found" in unknown.delivery.refused
    preset = through_chain(pod(priorityClassName="vgate-high", priority=5), config, engine)
    assert "must not be provided" in preset.delivery.refused


def test_priority_classes_in_the_manifests_are_cluster_state(tmp_path):
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "batch-low"},
                    "value": 10,
                    "globalDefault": True,
                },
                pod("p", "web"),
            ]
        )
    )
    verdicts = json.loads(vgate_eval("-f", str(manifest), "-o", "json").stdout)
    assert [v["kind"] for v in verdicts] == ["Pod"]
    priority = next(s for s in verdicts[0]["chain"] if s["step"] == "Priority admission")
    assert {"op": "add", "path": "/spec/priorityClassName", "value": "batch-low"} in priority["patch"]


# Bad input.


def vgate_eval(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*VGATE, "eval", "--policies", str(POLICIES), *args], capture_output=True, text=True, timeout=120
    )


def test_a_kind_the_model_cannot_default_is_bad_input(tmp_path):
    manifest = tmp_path / "widget.yaml"
    manifest.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    result = vgate_eval("-f", str(manifest))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{manifest}#0: cannot default Widget of example.com/v1: no CRD for it" in result.stderr
    assert vgate_eval("-f", str(manifest), "--as-submitted").returncode == 0


@pytest.mark.parametrize(
    "content,reason",
    [
        ("kind: [", "invalid YAML"),
        ("apiVersion: v1\nkind: ConfigMap\n", "not a CustomResourceDefinition"),
        ("kind: CustomResourceDefinition\nspec: {group: g}\n", "needs spec.group, spec.names.kind and spec.versions"),
        (
            "kind: CustomResourceDefinition\nspec: {group: g, names: {kind: K}, versions: [{name: v1}]}\n",
            "needs a name and schema.openAPIV3Schema",
        ),
    ],
)
def test_an_invalid_crd_file_is_bad_input(tmp_path, content, reason):
    crd = tmp_path / "crd.yaml"
    crd.write_text(content)
    result = vgate_eval(
        "-f", str(POLICIES / "security-host-ports" / "samples" / "denied-host-port.yaml"), "--crd", str(crd)
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert str(crd) in result.stderr and reason in result.stderr


def test_a_crd_given_with_crd_is_defaulted(tmp_path):
    crd = tmp_path / "crd.yaml"
    crd.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "spec": {
                    "group": "example.com",
                    "names": {"kind": "Widget"},
                    "versions": [
                        {
                            "name": "v1",
                            "schema": {
                                "openAPIV3Schema": {
                                    "properties": {"spec": {"default": {}, "properties": {"size": {"default": 3}}}}
                                }
                            },
                        }
                    ],
                },
            }
        )
    )
    manifest = tmp_path / "widget.yaml"
    manifest.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    result = json.loads(vgate_eval("-f", str(manifest), "--crd", str(crd), "-o", "json").stdout)
    assert (
        result[0]["allowed"] and {"op": "add", "path": "/spec", "value": {"size": 3}} in result[0]["chain"][0]["patch"]
    )


def test_an_unreadable_volcano_admission_config_is_bad_input(tmp_path):
    broken = tmp_path / "volcano-admission.conf"
    broken.write_text("resourceGroups: {}\n")
    result = vgate_eval(
        "-f",
        str(POLICIES / "security-host-ports" / "samples" / "denied-host-port.yaml"),
        "--volcano-admission-config",
        str(broken),
    )
    assert result.returncode == 2 and "needs a resourceGroups list" in result.stderr
    good = tmp_path / "good.conf"
    good.write_text(yaml.safe_dump({"resourceGroups": RESOURCE_GROUPS}))
    assert read_admission_config(good) == RESOURCE_GROUPS
    # Volcano's chart ships the file with every line commented out: no resource groups, valid to Volcano.
    shipped = tmp_path / "shipped.conf"
    shipped.write_text("#resourceGroups:\n#- resourceGroup: management\n#  schedulerName: default-scheduler\n")
    assert read_admission_config(shipped) == []
