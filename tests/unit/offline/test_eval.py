"""`vgate eval`: manifests judged offline, with exit codes like `kyverno apply`."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from helpers import POLICIES, VGATE, corpus_file


def vgate_eval(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*VGATE, "eval", "--policies", str(POLICIES), *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_denied_manifest_prints_diff_and_violation_and_exits_1():
    result = vgate_eval("-f", str(POLICIES / "network-no-external" / "samples" / "denied-no-egress-label.yaml"))
    assert result.returncode == 1
    assert result.stdout.startswith("DENIED  Pod ml-training/feature-store-open")
    assert "+    scheduling.volcano.sh/queue-name: training" in result.stdout
    assert "deny    [network-no-external]" in result.stdout and "lacks the label vgate.io/egress=deny" in result.stdout


def test_multi_document_jobs_are_judged_by_the_queues_the_config_defines(tmp_path):
    jobs = corpus_file("volcano-examples", "hierarchical-jobs_jobs.yaml")
    count = len([d for d in yaml.safe_load_all(jobs.read_text()) if d])
    unknown = json.loads(vgate_eval("-f", str(jobs), "-o", "json").stdout)
    assert len(unknown) == count
    assert all([v["rule"] for v in verdict["violations"] if v["action"] == "deny"] == ["scheduling-queue-allowed"]
               for verdict in unknown)
    queues = {d["spec"]["queue"] for d in yaml.safe_load_all(jobs.read_text()) if d}
    config = tmp_path / "vgate.yaml"
    config.write_text(
        yaml.safe_dump(
            {"queues": {"definitions": {"default": {}, **{q: {"namespaces": ["research-*"]} for q in queues}}}}
        )
    )
    result = vgate_eval("-f", str(jobs), "-o", "json", "--namespace", "research-nlp", "--config", str(config))
    assert result.returncode == 0, result.stdout
    assert all(v["allowed"] and v["namespace"] == "research-nlp" for v in json.loads(result.stdout))


def test_list_objects_from_stdin_are_expanded():
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "web"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        for i in range(3)
    ]
    pods[2]["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "training"}
    listing = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": pods})
    result = vgate_eval("-f", "-", "-o", "json", stdin=listing)
    verdicts = json.loads(result.stdout)
    assert [v["allowed"] for v in verdicts] == [True, True, False]
    assert result.returncode == 1
    assert verdicts[2]["violations"][0]["rule"] == "scheduling-queue-allowed"


def test_update_operation_is_not_mutated():
    result = vgate_eval(
        "-f",
        str(POLICIES / "scheduling-queue-allowed" / "samples" / "allowed-injected-queue.yaml"),
        "--operation",
        "UPDATE",
        "-o",
        "json",
    )
    assert result.returncode == 0 and json.loads(result.stdout)[0]["patch"] == []


@pytest.mark.parametrize(
    "content,message",
    [
        ("kind: [", "invalid YAML"),
        ("just a string\n", "not a Kubernetes object"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "not a Kubernetes object"),
        ("", "no objects found"),
    ],
)
def test_bad_input_exits_2_with_the_file(tmp_path, content, message):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(content)
    result = vgate_eval("-f", str(manifest))
    assert result.returncode == 2
    assert message in result.stderr and str(manifest) in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file_exits_2():
    result = vgate_eval("-f", "/nonexistent/pod.yaml")
    assert result.returncode == 2 and "cannot read" in result.stderr


def test_a_missing_policy_directory_says_how_to_name_one(tmp_path):
    """Run from elsewhere, vgate finds no policies/: the error says where it looked and what to pass."""
    manifest = POLICIES / "security-privileged-container" / "samples" / "denied-privileged.yaml"
    for command in (["eval", "-f", str(manifest)], ["serve", "--bind", "127.0.0.1:1"]):
        result = subprocess.run([*VGATE, *command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
        assert f"{tmp_path}/policies: policy directory does not exist: give it with --policies DIR" in result.stderr


def test_a_volcano_job_is_followed_by_the_pod_group_its_controller_creates(tmp_path):
    """Admitted, a Job is followed by the PodGroup Volcano's controller makes of it. A namespace
    annotated with a queue vgate does not know: vgate (like Volcano's PodGroup mutator) takes the
    annotation, so the Job itself is refused, naming the queue, and no PodGroup follows: exit 1."""
    job = ("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j, namespace: research-x}\n"
           "spec: {minAvailable: 1, tasks: [{name: t, replicas: 2, template: {spec: {containers: "
           "[{name: c, image: registry.example.com/app:1}]}}}]}\n")
    plain, annotated = tmp_path / "job.yaml", tmp_path / "annotated.yaml"
    plain.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: research-x}\n---\n" + job)
    annotated.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: research-x, annotations: "
                         "{scheduling.volcano.sh/queue-name: nowhere}}\n---\n" + job)
    default = vgate_eval("-f", str(plain), "--with-volcano", "-o", "json")
    job_verdict, group = json.loads(default.stdout)
    assert default.returncode == 0 and job_verdict["kind"] == "Job" and group["kind"] == "PodGroup"
    assert group["object"]["spec"] == {"minMember": 1, "minTaskMember": {"t": 2}, "queue": "default",
                                       "priorityClassName": "vgate-normal"}
    enabled = vgate_eval("-f", str(annotated), "--volcano-enabled-admission", "/jobs/mutate,/podgroups/mutate")
    assert enabled.returncode == 1
    assert "DENIED  Job research-x/j" in enabled.stdout and 'queue "nowhere"' in enabled.stdout
    assert "PodGroup" not in enabled.stdout.split("DENIED  Job", 1)[1].split("\n", 1)[0]


def test_a_namespace_given_with_volcanos_queue_annotation_routes_its_pods_as_the_server_does():
    manifests = yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "ml-inference", "annotations": {"scheduling.volcano.sh/queue-name": "batch"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml-inference"},
         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}])
    result = vgate_eval("-f", "-", "-o", "json", stdin=manifests)
    [verdict] = json.loads(result.stdout)
    queue = [op["value"] for op in verdict["patch"] if op["path"] == "/metadata/annotations"]
    assert queue and queue[0]["scheduling.volcano.sh/queue-name"] == "batch", verdict["patch"]


def test_a_cluster_that_cannot_be_read_is_bad_input(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "away",
        "clusters": [{"name": "away", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "away", "user": {"token": "t"}}],
        "contexts": [{"name": "away", "context": {"cluster": "away", "user": "away"}}]}))
    result = vgate_eval("--kubeconfig", str(kubeconfig), "-f", str(POLICIES / "network-no-external" / "samples" /
                                                                   "denied-no-egress-label.yaml"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"Error: {kubeconfig}: cannot read the cluster: ")
    assert "Traceback" not in result.stderr


def test_a_binding_is_judged_against_the_nodes_and_pods_given_before_it():
    """The Node and the Pod first (the cluster state), then Bindings: one to an encrypted node of the
    pod's zone (allowed, and the pod is then on it), one of an unknown pod (refused per failureMode)."""
    sample = (POLICIES / "placement-binding" / "samples" / "allowed-encrypted-node-in-its-zone.yaml").read_text()
    ghost = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "ghost", "namespace": "ml-training"},
             "target": {"apiVersion": "v1", "kind": "Node", "name": "zone-a-sev-1"}}
    result = vgate_eval("-f", "-", "-o", "json", stdin=sample + "\n---\n" + yaml.safe_dump(ghost))
    assert result.returncode == 1, result.stderr
    group, pod, binding, refused = json.loads(result.stdout)  # the PodGroup fixing the pod's zone first
    assert group["kind"] == "PodGroup" and group["allowed"]
    assert pod["allowed"] and binding["allowed"] and binding["source"].endswith("#3")
    assert not refused["allowed"] and "pod ml-training/ghost is not in vgate's cluster state yet" in refused["error"]


def test_a_spark_config_map_among_the_manifests_is_read_as_the_server_reads_it():
    """vgate eval takes a ConfigMap among the manifests as the cluster's: a SparkApplication naming it
    is judged with its spark-defaults.conf, and one naming a ConfigMap not given is refused with its name."""
    [example] = [d for d in yaml.safe_load_all(corpus_file("spark-operator", "examples", "spark-pi.yaml").read_text())
                 if d]
    example["metadata"] = {"name": "etl", "namespace": "ml-training"}
    example["spec"]["driver"].update(labels={"vgate.io/data-classification": "sensitive"},
                                     nodeSelector={"topology.kubernetes.io/zone": "zone-a"})
    example["spec"]["sparkConfigMap"] = "etl-defaults"
    zone_b = "spark.kubernetes.executor.node.selector.topology.kubernetes.io/zone=zone-b\n"
    defaults = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"spark-defaults.conf": zone_b},
                "metadata": {"name": "etl-defaults", "namespace": "ml-training"}}
    given = vgate_eval("-f", "-", "-o", "json", stdin=yaml.safe_dump_all([defaults, example]))
    [verdict] = json.loads(given.stdout)
    assert "spec.driver to zone-a, spec.executor to zone-b" in verdict["message"], verdict["message"]
    missing = vgate_eval("-f", "-", "-o", "json", stdin=yaml.safe_dump(example))
    [refused] = json.loads(missing.stdout)
    assert not refused["allowed"] and "sparkConfigMap etl-defaults does not exist in ml-training" in refused["message"]


def test_admin_network_policies_among_the_manifests_decide_egress_as_the_server_does():
    """A sensitive pod in a namespace without NetworkPolicies: with a BaselineAdminNetworkPolicy that
    lets it reach only the DNS it is confined; with an AdminNetworkPolicy allowing the internet above
    that, it is not, named by the admin policy's rule."""
    sensitive = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vault", "namespace": "bare", "labels": {
        "vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example.com/v@sha256:" + "0" * 64}]}}
    subject = {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "bare"}}}
    baseline = {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
                "metadata": {"name": "default"}, "spec": {"subject": subject, "egress": [
                    {"action": "Deny", "to": [{"networks": ["0.0.0.0/0", "::/0"]}]},
                    {"action": "Deny", "to": [{"namespaces": {}}]}]}}
    internet = {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
                "metadata": {"name": "internet"}, "spec": {"priority": 5, "subject": subject, "egress": [
                    {"action": "Allow", "to": [{"networks": ["0.0.0.0/0"]}]}]}}

    def egress_denied(*manifests: dict) -> list[str]:
        [verdict] = json.loads(vgate_eval("-f", "-", "-o", "json", stdin=yaml.safe_dump_all(manifests)).stdout)
        return [v["message"] for v in verdict["violations"] if v["rule"] == "network-egress-confined"]
    assert egress_denied(baseline, sensitive) == []
    [message] = egress_denied(baseline, internet, sensitive)
    assert "AdminNetworkPolicy internet egress[0] Allow reaches 0.0.0.0/0 outside the internal ranges" in message
    [message] = egress_denied({**baseline, "kind": "NetworkPolicy", "apiVersion": "networking.k8s.io/v1",
                               "metadata": {"name": "x", "namespace": "web"}, "spec": {"podSelector": {}}}, sensitive)
    assert "no NetworkPolicy selects pod bare/vault for egress" in message  # a NetworkPolicy elsewhere: no tier
