"""The Helm chart (charts/vgate), linted and rendered by Helm's own Go engine (helm-python-sdk, no
helm binary), for the default values and the value sets operators use; every rendered object of a
built-in kind checked against the Kubernetes schema, and the same invariants as deploy/."""

from __future__ import annotations

import base64
import sys

import helm_python as helm
import kubernetes_validate
import pytest

import deploy_invariants as check
from helpers import K8S_VERSION, ROOT

sys.path.insert(0, str(ROOT / "deploy"))
from render import CHART, plain, render  # noqa: E402

VALUE_SETS = {
    "defaults": {},
    "cert-manager": {"certManager": {"enabled": True}},
    "existing-claim": {"audit": {"existingClaim": "shared-evidence"},
                       "reportWriter": {"anchor": {"existingClaim": "writer-anchor"}}},
    "mtls": {"mtls": {"clientCASecret": "apiserver-client-ca"}},
    "by-url": {"webhooks": {"url": "https://192.0.2.10:8443/"}},
    "three-exempt": {"exemptNamespaces": ["kube-system", "kube-public", "kube-node-lease", "volcano-system",
                                          "gpu-operator", "monitoring", "logging"]},
    "monitoring": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
                   "grafanaDashboard": {"enabled": True}},
}
NAMESPACE = "platform-admission"
# Custom resources (cert-manager, prometheus-operator) are not in the Kubernetes schema.
CUSTOM_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")


@pytest.fixture(scope="module", params=list(VALUE_SETS))
def rendering(request):
    values = VALUE_SETS[request.param]
    return request.param, values, check.by_name(render(values, namespace=NAMESPACE))


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_the_chart_lints_clean_for_every_value_set(name):
    report = helm.lint(CHART, VALUE_SETS[name], strict=True, namespace=NAMESPACE, kube_version="v1.35.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_every_object_is_valid_kubernetes_and_the_invariants_hold(rendering, tmp_path):
    name, _, rendered = rendering
    for key, document in rendered.items():
        if document["apiVersion"].startswith(CUSTOM_GROUPS):
            continue
        try:
            kubernetes_validate.validate(document, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(f"{name}: {key}: {error}") from None
    check.deployment_runs_ready_checked_non_root_replicas(rendered, NAMESPACE)
    check.webhooks_are_registered_as_designed(rendered, NAMESPACE)
    check.exemptions_are_one_list(rendered, NAMESPACE, tmp_path)
    check.config_is_valid_and_its_priority_classes_exist(rendered, tmp_path)
    check.replicas_append_and_only_the_report_writer_holds_the_key(rendered)
    check.only_the_control_plane_and_monitoring_reach_the_webhook(rendered)


def test_values_that_do_not_exist_are_refused_by_the_schema():
    chart = helm.Chart.load(CHART)
    for bad in ({"webhooks": {"validating": {"failurePolicy": "Maybe", "timeoutSeconds": 5}}},
                {"replicaCount": 0}, {"exemptNamespaces": ["Not_A_Name"]}, {"colour": "red"}):
        with pytest.raises(helm.HelmError):
            chart.validate_schema(bad)


def test_exempt_namespaces_are_one_value_rendered_twice(tmp_path):
    rendered = check.by_name(render(VALUE_SETS["three-exempt"], namespace=NAMESPACE))
    exempt = check.exemptions_are_one_list(rendered, NAMESPACE, tmp_path)
    assert {"gpu-operator", "monitoring", "logging", NAMESPACE} <= set(exempt)


def test_cert_manager_issues_the_certificate_and_injects_the_ca():
    rendered = check.by_name(render(VALUE_SETS["cert-manager"], namespace=NAMESPACE))
    serving = rendered["Certificate/vgate-serving"]["spec"]
    assert serving["secretName"] == "vgate-tls" and serving["issuerRef"] == {"name": "vgate-ca", "kind": "Issuer"}
    assert f"vgate.{NAMESPACE}.svc" in serving["dnsNames"]
    assert rendered["Certificate/vgate-ca"]["spec"]["isCA"] is True
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        configuration = rendered[f"{kind}/vgate"]
        annotations = configuration["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/vgate-serving"
        assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]


def test_without_cert_manager_the_ca_bundle_value_is_used():
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    rendered = check.by_name(render({"tls": {"secretName": "vgate-tls", "caBundle": bundle}}))
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert rendered[f"{kind}/vgate"]["webhooks"][0]["clientConfig"]["caBundle"] == bundle
    assert not any(key.startswith("Certificate/") for key in rendered)


def test_webhooks_url_routes_both_configurations_by_url_instead_of_the_service():
    rendered = check.by_name(render({"webhooks": {"url": "https://192.0.2.10:8443/"}}))
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        client = rendered[f"{kind}/vgate"]["webhooks"][0]["clientConfig"]
        assert client["url"] == "https://192.0.2.10:8443" + path and "service" not in client
    for bad in ("http://192.0.2.10:8443", "https://host/path", "https://host?x=1"):
        with pytest.raises(Exception, match="url"):
            render({"webhooks": {"url": bad}})


def test_an_existing_claim_is_used_and_none_is_created():
    rendered = check.by_name(render(VALUE_SETS["existing-claim"]))
    assert not any(key.startswith("PersistentVolumeClaim/") for key in rendered)
    volumes = {v["name"]: v for v in rendered["Deployment/vgate"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["audit"]["persistentVolumeClaim"]["claimName"] == "shared-evidence"
    writer = rendered["CronJob/vgate-report-writer"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {v["name"]: v for v in writer["volumes"]}["anchor"]["persistentVolumeClaim"]["claimName"] == "writer-anchor"


def test_mutual_tls_mounts_the_client_ca_and_names_it_in_the_config(tmp_path):
    rendered = check.by_name(render(VALUE_SETS["mtls"]))
    assert check.config_of(rendered, tmp_path).server["clientCA"] == "/etc/vgate/client-ca/ca.crt"
    pod = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["client-ca"]["secret"]["secretName"] == "apiserver-client-ca"
    assert {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]} >= {"/etc/vgate/client-ca"}
    assert pod["containers"][0]["readinessProbe"]["httpGet"]["port"] == "metrics"  # no client certificate needed


def test_policies_reach_the_pods_from_a_config_map_where_hot_reload_sees_them():
    rendered = check.by_name(render())
    data = rendered["ConfigMap/vgate-policies"]["data"]
    shipped = sorted(p.relative_to(ROOT / "policies").as_posix() for p in (ROOT / "policies").rglob("*.rego")
                     if not p.name.endswith("_test.rego"))
    items = {v["name"]: v for v in rendered["Deployment/vgate"]["spec"]["template"]["spec"]["volumes"]}["policies"]
    assert sorted(item["path"] for item in items["configMap"]["items"]) == shipped
    assert data["security-seccomp.policy.rego"] == (ROOT / "policies/security-seccomp/policy.rego").read_text()
    args = rendered["Deployment/vgate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--policies=/etc/vgate/policies" in args


def test_monitoring_objects_alert_on_what_the_issue_names():
    rendered = check.by_name(render(VALUE_SETS["monitoring"]))
    assert rendered["ServiceMonitor/vgate"]["spec"]["endpoints"][0]["path"] == "/metrics"
    alerts = {rule["alert"] for group in rendered["PrometheusRule/vgate"]["spec"]["groups"] for rule in group["rules"]}
    assert alerts == {"VgateWebhookErrors", "VgateDeniedUnrecorded", "VgateReloadFailing", "VgateReportMissing",
                      "VgateCertificateExpiring"}


def test_deploy_is_the_charts_plain_rendering():
    assert (ROOT / "deploy" / "vgate.yaml").read_text() == plain(), "run python deploy/render.py"


def selects(selector: dict, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions) against an object's labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present or operator == "DoesNotExist" and present:
            return False
    return True


def test_the_break_glass_label_opts_a_namespace_out_of_both_webhooks(tmp_path):
    """End to end with the rendered configurations: the API server sets kubernetes.io/metadata.name on
    every Namespace; the selector of both webhooks skips exempt names and vgate.io/exempt=true, and
    the chain model (what `vgate eval` runs) decides the same for each."""
    from webhook.offline.chain.model import Cluster

    rendered = check.by_name(render(namespace=NAMESPACE))
    config = check.config_of(rendered, tmp_path)
    namespaces = [("team-a", {}), ("team-b", {"vgate.io/exempt": "true"}), ("team-c", {"vgate.io/exempt": "false"}),
                  ("kube-system", {}), (NAMESPACE, {}), ("volcano-system", {})]
    for name, labels in namespaces:
        cluster = Cluster.build(config.document)
        cluster.learn({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            selector = rendered[f"{kind}/vgate"]["webhooks"][0]["namespaceSelector"]
            called = selects(selector, {**labels, "kubernetes.io/metadata.name": name})
            assert called is cluster.calls_vgate(name), (kind, name, labels)
            assert called is (name in {"team-a", "team-c"})


def test_the_dashboard_and_alerts_query_only_metrics_vgate_exposes():
    """Every vgate_* series a panel or an alert reads is one /metrics serves."""
    import json
    import re

    from webhook.server.metrics import Metrics

    rendered = check.by_name(render(VALUE_SETS["monitoring"]))
    dashboard = json.loads(rendered["ConfigMap/vgate-dashboard"]["data"]["vgate.json"])
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [r["expr"] for g in rendered["PrometheusRule/vgate"]["spec"]["groups"] for r in g["rules"]]
    exposed = {m.name for m in Metrics().registry.collect()}
    used = {re.sub(r"_(bucket|total|count|sum)$", "", name) for q in queries for name in re.findall(r"vgate_\w+", q)}
    assert used and used <= {re.sub(r"_total$", "", name) for name in exposed}, used - exposed
    assert len(dashboard["panels"]) >= 6
    # Every reason a query selects is one vgate's code gives vgate_errors_total (an alert on a reason
    # no code emits can never fire: VgateDeniedUnrecorded selected "audit_write", vgate says "audit").
    code = "\n".join(path.read_text() for path in (ROOT / "webhook").rglob("*.py"))
    emitted = set(re.findall(r'errors\.labels\([^,]+, "(\w+)"\)', code))
    emitted |= {f"http_{status}" for status in (400, 408, 413)}
    selected = {reason for q in queries for reason in re.findall(r'vgate_errors_total\{[^}]*reason="(\w+)"', q)}
    assert "audit" in emitted and selected <= emitted, selected - emitted
