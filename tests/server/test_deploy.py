"""The deploy/ manifests, rendered by `kubectl kustomize`, and the Dockerfile."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from webhook.core.config import load_config, parse_config

from helpers import ROOT


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is required (kubectl kustomize renders deploy/); .ci/run checks for it"
    output = subprocess.run([kubectl, "kustomize", str(ROOT / "deploy")], capture_output=True, text=True, check=True)
    documents = [d for d in yaml.safe_load_all(output.stdout) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}


def test_deployment_runs_three_ready_checked_non_root_replicas(rendered):
    deployment = rendered["Deployment/vgate"]
    assert deployment["metadata"]["namespace"] == "vgate-system"
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["args"][0] == "serve" and container["image"].startswith("registry.example.com/platform/vgate:")


def test_service_and_disruption_budget(rendered):
    port = rendered["Service/vgate"]["spec"]["ports"][0]
    assert (port["port"], port["targetPort"]) == (443, "https")
    container_port = rendered["Deployment/vgate"]["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert (container_port["name"], container_port["containerPort"]) == ("https", 8443)
    assert rendered["PodDisruptionBudget/vgate"]["spec"]["minAvailable"] == 2


@pytest.mark.parametrize("kind,path,failure_policy", [
    ("MutatingWebhookConfiguration", "/mutate", "Ignore"),
    ("ValidatingWebhookConfiguration", "/validate", "Fail"),
])
def test_webhook_configurations(rendered, kind, path, failure_policy):
    webhook = rendered[f"{kind}/vgate"]["webhooks"][0]
    assert webhook["clientConfig"]["service"] == {
        "name": "vgate",
        "namespace": "vgate-system",
        "path": path,
        "port": 443,
    }
    assert webhook["sideEffects"] == "None" and webhook["admissionReviewVersions"] == ["v1"]
    assert 1 <= webhook["timeoutSeconds"] <= 10
    assert webhook["failurePolicy"] == failure_policy
    resources = {
        (group, resource, operation)
        for rule in webhook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for operation in rule["operations"]
    }
    vgate_kinds = {("", "pods"), ("batch.volcano.sh", "jobs"), ("scheduling.volcano.sh", "podgroups")}
    if kind.startswith("Mutating"):
        assert resources == {(group, resource, "CREATE") for group, resource in vgate_kinds}
        assert webhook["reinvocationPolicy"] == "IfNeeded"
    else:
        controllers = {("apps", r) for r in ("deployments", "statefulsets", "daemonsets", "replicasets")}
        controllers |= {("", "replicationcontrollers"), ("batch", "jobs"), ("batch", "cronjobs")}
        assert resources == {(g, r, op) for g, r in vgate_kinds | controllers for op in ("CREATE", "UPDATE")} | {
            ("", "pods/ephemeralcontainers", "UPDATE")
        }


@pytest.mark.parametrize("kind", ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"])
def test_webhook_exemptions_equal_the_configs_one_list(rendered, kind, tmp_path):
    """The platform's namespaces are exempt once: the config's list is what the API server skips."""
    config_map = next(d for k, d in rendered.items() if k.startswith("ConfigMap/vgate-config"))
    (tmp_path / "vgate.yaml").write_text(config_map["data"]["vgate.yaml"])
    exempt = load_config(tmp_path / "vgate.yaml").document["exemptNamespaces"]
    assert exempt == load_config(None).document["exemptNamespaces"] == parse_config("{}").document["exemptNamespaces"]
    assert {"kube-system", "kube-public", "kube-node-lease", "volcano-system", "vgate-system"} <= set(exempt)
    by_name, by_label = rendered[f"{kind}/vgate"]["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert (by_name["key"], by_name["operator"]) == ("kubernetes.io/metadata.name", "NotIn")
    assert sorted(by_name["values"]) == sorted(exempt)
    assert by_label == {"key": "vgate.io/exempt", "operator": "NotIn", "values": ["true"]}


def test_shipped_cluster_config_is_valid_and_its_priority_classes_exist(rendered, tmp_path):
    config_map = next(d for k, d in rendered.items() if k.startswith("ConfigMap/vgate-config"))
    path = tmp_path / "vgate.yaml"
    path.write_text(config_map["data"]["vgate.yaml"])
    config = load_config(path)
    classes = {k.split("/", 1)[1]: d["value"] for k, d in rendered.items() if k.startswith("PriorityClass/")}
    assert config.priority_values == {name: classes[name] for name in config.priority_values}


def test_dockerfile_is_slim_non_root_and_serves():
    dockerfile = (ROOT / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE)
    assert bases and all(b.startswith("python:3.11-slim") for b in bases)
    assert re.search(r"^USER 10001", dockerfile, re.MULTILINE)
    assert 'ENTRYPOINT ["vgate"]' in dockerfile and 'CMD ["serve"]' in dockerfile
    final_stage = dockerfile.split("\nFROM ")[-1]
    assert "gcc" not in final_stage and "build-essential" not in final_stage


def test_replicas_append_to_the_shared_log_and_only_the_report_writer_holds_the_key(rendered):
    spec = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["audit"]["persistentVolumeClaim"]["claimName"] == "vgate-audit"
    assert rendered["PersistentVolumeClaim/vgate-audit"]["spec"]["accessModes"] == ["ReadWriteMany"]
    mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["/app/audit"]["name"] == "audit" and "/app/reports" not in mounts
    assert not any("secret" in v and v["secret"]["secretName"] == "vgate-report-key" for v in volumes.values())
    assert "--no-hourly-reports" in spec["containers"][0]["args"]
    writer = rendered["CronJob/vgate-report-writer"]["spec"]
    assert writer["concurrencyPolicy"] == "Forbid"
    pod = writer["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "vgate-report-writer" != spec["serviceAccountName"]
    assert pod["containers"][0]["args"][:2] == ["report", "--catch-up"]
    writer_volumes = {v["name"]: v for v in pod["volumes"]}
    writer_mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert writer_mounts["/app/keys"]["readOnly"] is True
    assert writer_volumes["report-key"]["secret"]["secretName"] == "vgate-report-key"
    assert writer_volumes["audit"]["persistentVolumeClaim"]["claimName"] == "vgate-audit"
    assert "certs" not in writer_volumes, "the report key is kept apart from the TLS key"


def test_only_the_control_plane_and_monitoring_reach_the_webhook(rendered):
    policy = rendered["NetworkPolicy/vgate"]["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "vgate"}
    assert policy["policyTypes"] == ["Ingress"]
    sources = [rule["from"][0] for rule in policy["ingress"]]
    assert [list(source) for source in sources] == [["ipBlock"], ["namespaceSelector"]]
    assert sources[1]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert all(rule["ports"] == [{"port": 8443, "protocol": "TCP"}] for rule in policy["ingress"])
    port = rendered["Deployment/vgate"]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    assert port == 8443
