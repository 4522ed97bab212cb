"""What every rendering of vgate's manifests must hold: the chart with any value set, and deploy/.

Each check takes the rendered objects by "Kind/name" and the namespace they were rendered for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webhook.core.kinds import KINDS, POD_SUBRESOURCES
from webhook.files.config_file import load_config, parse_config

Objects = dict[str, dict[str, Any]]
PLATFORM = {"kube-system", "kube-public", "kube-node-lease", "volcano-system"}


def by_name(documents: list[dict[str, Any]]) -> Objects:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}


def config_of(rendered: Objects, tmp_path: Path):
    path = tmp_path / "vgate.yaml"
    path.write_text(rendered["ConfigMap/vgate-config"]["data"]["vgate.yaml"])
    return load_config(path)


def deployment_runs_ready_checked_non_root_replicas(rendered: Objects, namespace: str) -> None:
    deployment = rendered["Deployment/vgate"]
    assert deployment["metadata"]["namespace"] == namespace
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert deployment["spec"]["replicas"] >= 2
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert "--metrics-bind=0.0.0.0:9090" in container["args"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["args"][0] == "serve"
    port = rendered["Service/vgate"]["spec"]["ports"][0]
    assert (port["port"], port["targetPort"]) == (443, "https")
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [("https", 8443), ("metrics", 9090)]
    assert rendered["PodDisruptionBudget/vgate"]["spec"]["minAvailable"] >= 1


def webhooks_are_registered_as_designed(rendered: Objects, namespace: str) -> None:
    for kind, path, operations in (("MutatingWebhookConfiguration", "/mutate", {"CREATE"}),
                                   ("ValidatingWebhookConfiguration", "/validate", {"CREATE", "UPDATE"})):
        webhook = rendered[f"{kind}/vgate"]["webhooks"][0]
        client = webhook["clientConfig"]
        if "url" in client:  # webhooks.url: the same path on the URL given, and no Service
            assert client["url"].startswith("https://") and client["url"].endswith(path) and "service" not in client
        else:
            assert client["service"] == {"name": "vgate", "namespace": namespace, "path": path, "port": 443}
        assert webhook["sideEffects"] == "None" and webhook["admissionReviewVersions"] == ["v1"]
        assert 1 <= webhook["timeoutSeconds"] <= 30
        resources = {(group, resource, operation) for rule in webhook["rules"] for group in rule["apiGroups"]
                     for resource in rule["resources"] for operation in rule["operations"]}
        # what the registry (webhook/core/kinds.py) says each webhook is sent: its mutated kinds, its judged ones
        mutated = {(k.group, k.resource) for k in KINDS if k.mutated}
        judged = {(k.group, k.resource) for k in KINDS if k.webhook == "validate.vgate.io"}
        if kind.startswith("Mutating"):
            assert resources == {(g, r, o) for g, r in mutated for o in operations}
            assert webhook["reinvocationPolicy"] == "IfNeeded"
        else:
            assert resources == {(g, r, o) for g, r in judged for o in operations} | {
                ("", f"pods/{sub}", "UPDATE") for sub in POD_SUBRESOURCES}


def exemptions_are_one_list(rendered: Objects, namespace: str, tmp_path: Path) -> list[str]:
    """The config's exemptNamespaces is what both webhook configurations' namespaceSelector skips."""
    exempt = config_of(rendered, tmp_path).document["exemptNamespaces"]
    assert PLATFORM | {namespace} <= set(exempt)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        by_name_, by_label = rendered[f"{kind}/vgate"]["webhooks"][0]["namespaceSelector"]["matchExpressions"]
        assert (by_name_["key"], by_name_["operator"]) == ("kubernetes.io/metadata.name", "NotIn")
        assert sorted(by_name_["values"]) == sorted(exempt)
        assert by_label == {"key": "vgate.io/exempt", "operator": "NotIn", "values": ["true"]}
    return exempt


def config_is_valid_and_its_priority_classes_exist(rendered: Objects, tmp_path: Path) -> None:
    config = config_of(rendered, tmp_path)
    classes = {k.split("/", 1)[1]: d["value"] for k, d in rendered.items() if k.startswith("PriorityClass/")}
    assert config.priority_values == {name: classes[name] for name in config.priority_values}
    assert config.document["audit"]["dir"] == "/app/audit" and config.document["reports"]["dir"] == "/app/reports"
    assert config.document["reports"]["anchorFile"].startswith("/app/anchor/")  # the report writer's own volume
    assert parse_config("{}").document["exemptNamespaces"]  # the schema's own default list is not empty


def replicas_append_and_only_the_report_writer_holds_the_key(rendered: Objects) -> None:
    spec = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    claim = volumes["audit"]["persistentVolumeClaim"]["claimName"]
    if f"PersistentVolumeClaim/{claim}" in rendered:
        assert rendered[f"PersistentVolumeClaim/{claim}"]["spec"]["accessModes"] == ["ReadWriteMany"]
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
    assert writer_volumes["audit"]["persistentVolumeClaim"]["claimName"] == claim
    assert "certs" not in writer_volumes, "the report key is kept apart from the TLS key"
    anchor = writer_volumes["anchor"]["persistentVolumeClaim"]["claimName"]
    assert anchor != claim and writer_mounts["/app/anchor"]["name"] == "anchor"
    assert not any(v.get("persistentVolumeClaim", {}).get("claimName") == anchor for v in volumes.values()), \
        "only the report writer mounts the anchor: the gateway's pods (and whoever writes the audit volume) cannot"


def only_the_control_plane_and_monitoring_reach_the_webhook(rendered: Objects) -> None:
    """When the NetworkPolicy is on (opt-in: it needs the API servers' addresses), it admits them only."""
    if "NetworkPolicy/vgate" not in rendered:
        return
    policy = rendered["NetworkPolicy/vgate"]["spec"]
    selector = rendered["Deployment/vgate"]["spec"]["selector"]["matchLabels"]
    assert policy["podSelector"]["matchLabels"] == selector
    assert policy["policyTypes"] == ["Ingress"]
    sources = [rule["from"][0] for rule in policy["ingress"]]
    assert [list(source) for source in sources] == [["ipBlock"], ["namespaceSelector"]]
    assert sources[1]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert [rule["ports"] for rule in policy["ingress"]] == [[{"port": 8443, "protocol": "TCP"}],
                                                             [{"port": 9090, "protocol": "TCP"}]]


