"""The deploy/ manifests, rendered by `kubectl kustomize`, and the Dockerfile."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT
from webhook.config import load_config


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
    assert webhook["clientConfig"]["service"] == {"name": "vgate", "namespace": "vgate-system", "path": path, "port": 443}
    assert webhook["sideEffects"] == "None" and webhook["admissionReviewVersions"] == ["v1"]
    assert 1 <= webhook["timeoutSeconds"] <= 10
    assert webhook["failurePolicy"] == failure_policy
    excluded = webhook["namespaceSelector"]["matchExpressions"][0]
    assert excluded["key"] == "kubernetes.io/metadata.name" and excluded["operator"] == "NotIn"
    assert set(excluded["values"]) == {"kube-system", "vgate-system"}
    resources = {(r["apiGroups"][0], r["resources"][0]) for r in webhook["rules"]}
    assert resources == {("", "pods"), ("batch.volcano.sh", "jobs"), ("scheduling.volcano.sh", "podgroups")}
    if kind.startswith("Mutating"):
        assert webhook["reinvocationPolicy"] == "IfNeeded"


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


def test_replicas_share_the_audit_volume_and_read_the_report_key(rendered):
    spec = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["audit"]["persistentVolumeClaim"]["claimName"] == "vgate-audit"
    assert rendered["PersistentVolumeClaim/vgate-audit"]["spec"]["accessModes"] == ["ReadWriteMany"]
    mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["/app/audit"]["name"] == mounts["/app/reports"]["name"] == "audit"
    assert mounts["/app/keys"]["readOnly"] is True and volumes["report-key"]["secret"]["secretName"] == "vgate-report-key"
    assert volumes["certs"]["secret"]["secretName"] == "vgate-tls", "the report key is kept apart from the TLS key"
