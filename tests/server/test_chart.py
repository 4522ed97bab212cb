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
from helpers import K8S_VERSION, ROOT, trusted

sys.path.insert(0, str(ROOT / "deploy"))
from render import CHART, notes, plain
from render import render as render_chart


def render(values: dict | None = None, namespace: str = "vgate-system", release: str = "vgate") -> list[dict]:
    """The chart rendered with ``values``, as `helm template` renders them."""
    return render_chart(values or {}, namespace=namespace, release=release)


VALUE_SETS = {
    "defaults": {},
    "given-ca": trusted({}),
    "cert-manager": {"certManager": {"enabled": True}},
    "existing-claim": {"audit": {"existingClaim": "shared-evidence"},
                       "reportWriter": {"anchor": {"existingClaim": "writer-anchor"}}},
    "mtls": {"mtls": {"clientCASecret": "apiserver-client-ca"}},
    "by-url": {"webhooks": {"url": "https://192.0.2.10:8443/"}},
    "three-exempt": {"exemptNamespaces": ["kube-system", "kube-public", "kube-node-lease", "volcano-system",
                                          "gpu-operator", "monitoring", "logging"]},
    "monitoring": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
                   "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
                   "grafanaDashboard": {"enabled": True}},
    "network-policy": {"networkPolicy": {"enabled": True, "controlPlaneCIDRs": ["10.0.0.0/24"]}},
    "policy-reports": {"reportWriter": {"applyPolicyReports": True}},
    "forwarding": {"audit": {"forward": {"url": "relp+tls://collector.example:2514", "caSecret": "collector-ca",
                                         "clientSecret": "vgate-forward-client"}}},
    "scheduled": {"nodeSelector": {"node-role.kubernetes.io/platform": ""},
                  "tolerations": [{"key": "platform", "operator": "Exists", "effect": "NoSchedule"}],
                  "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                      "nodeSelectorTerms": [{"matchExpressions": [
                          {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}},
                  "imagePullSecrets": [{"name": "regcred"}],
                  "webhooks": {"matchConditions": [
                      {"name": "not-nodes", "expression": "!request.userInfo.username.startsWith('system:node:')"}]}},
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
        assert all("caBundle" not in webhook["clientConfig"] for webhook in configuration["webhooks"])


def test_without_cert_manager_the_ca_bundle_value_is_used():
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    rendered = check.by_name(render({"tls": {"secretName": "vgate-tls", "caBundle": bundle}}))
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert {w["clientConfig"]["caBundle"] for w in rendered[f"{kind}/vgate"]["webhooks"]} == {bundle}
    assert not any(key.startswith("Certificate/") for key in rendered)


def test_webhooks_url_routes_both_configurations_by_url_instead_of_the_service():
    rendered = check.by_name(render({"webhooks": {"url": "https://192.0.2.10:8443/"}}))
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        for webhook in rendered[f"{kind}/vgate"]["webhooks"]:
            client = webhook["clientConfig"]
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
    assert check.config_of(rendered, tmp_path).server.client_ca == "/etc/vgate/client-ca/ca.crt"
    pod = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["client-ca"]["secret"]["secretName"] == "apiserver-client-ca"
    assert {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]} >= {"/etc/vgate/client-ca"}
    assert pod["containers"][0]["readinessProbe"]["httpGet"]["port"] == "metrics"  # no client certificate needed


def test_forwarding_mounts_the_collectors_ca_and_the_client_pair_in_both_pods_that_forward(tmp_path):
    """The gateway forwards the decision log, the report writer its anchor: both get the config's
    audit.forward and the TLS material it names; the background audit, which forwards nothing, neither."""
    rendered = check.by_name(render(VALUE_SETS["forwarding"]))
    forward = check.config_of(rendered, tmp_path).audit.forward
    assert (forward.url, forward.ca_file, forward.cert_file, forward.key_file) == (
        "relp+tls://collector.example:2514", "/etc/vgate/forward-ca/ca.crt", "/etc/vgate/forward-client/tls.crt",
        "/etc/vgate/forward-client/tls.key")
    gateway = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    writer = rendered["CronJob/vgate-report-writer"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for pod in (gateway, writer):
        volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        assert volumes["forward-ca"] == "collector-ca" and volumes["forward-client"] == "vgate-forward-client"
        mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["forward-ca"]["readOnly"] and mounts["forward-client"]["mountPath"] == "/etc/vgate/forward-client"
    auditor = rendered["Deployment/vgate-audit"]["spec"]["template"]["spec"]
    assert not [v for v in auditor["volumes"] if v["name"].startswith("forward")]
    (tmp_path / "off").mkdir()
    off = check.config_of(check.by_name(render()), tmp_path / "off").audit.forward
    assert off.url == "" and off.ca_file is None  # the default: no forwarding, nothing mounted


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
                      "VgateCertificateExpiring", "VgateSlowAnswers", "VgateSensitiveWorkloadDrift",
                      "VgateForwardingBehind", "VgateAbsent"}


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
        cluster = Cluster.build(config)
        cluster.learn({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for webhook in rendered[f"{kind}/vgate"]["webhooks"]:  # the binding webhook's selector too
                if all(rule["scope"] == "Cluster" for rule in webhook["rules"]):
                    assert "namespaceSelector" not in webhook  # Nodes: no namespace to opt out (nodes.vgate.io)
                    continue
                called = selects(webhook["namespaceSelector"], {**labels, "kubernetes.io/metadata.name": name})
                assert called is cluster.calls_vgate(name), (webhook["name"], name, labels)
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


def test_the_default_install_keeps_its_own_certificate_with_least_privilege():
    """No caBundle and no cert-manager (the default, as `helm template` with no values renders it): the
    pods keep the certificate in a Secret the chart creates empty, and may touch that Secret and the
    release's two webhook configurations only; the webhooks carry no caBundle until vgate writes it."""
    rendered = check.by_name(render({}, namespace=NAMESPACE))
    args = rendered["Deployment/vgate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--tls-secret={NAMESPACE}/vgate-tls" in args and "--tls-service=vgate" in args
    assert {"--ca-inject=mutating/vgate", "--ca-inject=validating/vgate"} <= set(args)
    assert not any(a.startswith("--certs") for a in args)
    pod = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert not any(v.get("secret", {}).get("secretName") == "vgate-tls" for v in pod["volumes"])
    assert rendered["Secret/vgate-tls"].get("data") is None and rendered["Secret/vgate-tls"]["type"] == "Opaque"
    assert rendered["Role/vgate-certificate"]["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["vgate-tls"], "verbs": ["get", "update"]}]
    assert rendered["ClusterRole/vgate-ca-injection"]["rules"] == [
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
         "resourceNames": ["vgate"], "verbs": ["get", "patch"]}]
    for binding in ("RoleBinding/vgate-certificate", "ClusterRoleBinding/vgate-ca-injection"):
        assert rendered[binding]["subjects"] == [{"kind": "ServiceAccount", "name": "vgate", "namespace": NAMESPACE}]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert all("caBundle" not in w["clientConfig"] for w in rendered[f"{kind}/vgate"]["webhooks"])
    by_url = render({"webhooks": {"url": "https://192.0.2.10:8443/"}})
    [deployment] = [o for o in by_url if o["kind"] == "Deployment" and o["metadata"]["name"] == "vgate"]
    assert "--tls-host=192.0.2.10" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    for other in (VALUE_SETS["cert-manager"], VALUE_SETS["given-ca"]):  # the Secret is theirs, and no RBAC on it
        assert not any(key.startswith(("Role/", "ClusterRole/vgate-ca")) or key == "Secret/vgate-tls"
                       for key in check.by_name(render(other)))
    assert "Cg==" not in plain()  # deploy/ takes cert-manager's CA


def test_the_network_policy_is_opt_in_and_needs_the_api_servers_addresses():
    assert not any(key.startswith("NetworkPolicy/") for key in check.by_name(render()))
    with pytest.raises(helm.errors.HelmRenderError, match="networkPolicy.controlPlaneCIDRs"):
        render({"networkPolicy": {"enabled": True}})
    policy = check.by_name(render(VALUE_SETS["network-policy"]))["NetworkPolicy/vgate"]
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.0.0.0/24"}}]


def test_the_install_notes_name_the_releases_own_objects():
    """NOTES.txt once said deployment/vgate and the webhook configuration vgate whatever the release."""
    printed = notes({}, namespace="platform-admission", release="platform")
    objects = check.by_name(render({}, namespace="platform-admission", release="platform"))
    assert "Deployment/platform-vgate" in objects and "ValidatingWebhookConfiguration/platform-vgate" in objects
    assert "rollout status deployment/platform-vgate" in printed
    assert "patch validatingwebhookconfiguration platform-vgate " in printed
    assert "deployment/vgate" not in printed and "validatingwebhookconfiguration vgate " not in printed


def test_two_releases_share_no_name():
    first, second = (check.by_name(render(release=name)) for name in ("vgate", "team-b"))
    for key in second:
        kind, name = key.split("/", 1)
        if kind != "PriorityClass":  # named by the config's queues; priorityClasses.create: false in all but one
            assert "team-b-vgate" in name, key
            assert key not in first, key
    assert "MutatingWebhookConfiguration/team-b-vgate" in second
    webhook = second["ValidatingWebhookConfiguration/team-b-vgate"]["webhooks"][0]
    assert webhook["clientConfig"]["service"]["name"] == "team-b-vgate"


@pytest.mark.parametrize("replicas,expected", [(1, None), (2, 1), (3, 2), (5, 2)])
def test_the_disruption_budget_never_blocks_every_drain(replicas, expected):
    rendered = check.by_name(render({"replicaCount": replicas}))
    budget = rendered.get("PodDisruptionBudget/vgate")
    assert (budget["spec"]["minAvailable"] if budget else None) == expected


def test_scheduling_pull_secrets_and_match_conditions_reach_both_pods_and_both_webhooks():
    values = VALUE_SETS["scheduled"]
    rendered = check.by_name(render(values))
    gateway = rendered["Deployment/vgate"]["spec"]["template"]["spec"]
    writer = rendered["CronJob/vgate-report-writer"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for pod in (gateway, writer):
        for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets"):
            assert pod[key] == values[key], key
    mutating, validating = (rendered[f"{kind}/vgate"]["webhooks"][0]["matchConditions"]
                            for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"))
    assert mutating == values["webhooks"]["matchConditions"]
    # the chart's own first: a PodGroup's status writes are not sent (tests/e2e/test_tenant_bypasses.py)
    assert [c["name"] for c in validating] == ["podgroup-judged-fields-changed"] + [
        c["name"] for c in values["webhooks"]["matchConditions"]]
    assert validating[1:] == values["webhooks"]["matchConditions"]


def test_monitoring_objects_carry_the_labels_prometheus_selects():
    rendered = check.by_name(render(VALUE_SETS["monitoring"]))
    for key in ("ServiceMonitor/vgate", "PrometheusRule/vgate"):
        assert rendered[key]["metadata"]["labels"]["release"] == "kube-prometheus-stack", key


def test_cert_managers_namespace_is_exempt_when_it_issues_the_certificate(tmp_path):
    rendered = check.by_name(render(VALUE_SETS["cert-manager"]))
    assert "cert-manager" in check.config_of(rendered, tmp_path).document["exemptNamespaces"]
    selector = rendered["ValidatingWebhookConfiguration/vgate"]["webhooks"][0]["namespaceSelector"]
    assert "cert-manager" in selector["matchExpressions"][0]["values"]
    assert "cert-manager" not in check.config_of(check.by_name(render()), tmp_path).document["exemptNamespaces"]


@pytest.mark.parametrize("publish", [False, True])
def test_the_background_audit_may_list_every_kind_it_judges_and_reads_and_write_only_its_reports(publish: bool):
    """The scanner's ClusterRole against the kinds registry (webhook/background/scan.py): a kind
    added to the registry and not here would be a scan that fails with 403 in every cluster."""
    from webhook.background.scan import SCANNED
    from webhook.cluster.state import KINDS as STATE_KINDS

    objects = render({"backgroundAudit": {"publishPolicyReports": publish}})
    [role] = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "vgate-audit"]
    allowed = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    needed = {(kind.group, kind.resource) for kind in SCANNED}
    needed |= {(w.group_version.rpartition("/")[0], w.path.rsplit("/", 1)[1]) for w in STATE_KINDS.values()}
    assert {(g, r) for g, r in needed if (g, r, "list") not in allowed} == set()
    writes = {(g, r) for g, r, v in allowed if v in ("create", "patch", "update", "delete")}
    assert writes == ({("wgpolicyk8s.io", "policyreports"), ("wgpolicyk8s.io", "clusterpolicyreports")}
                      if publish else set())
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "vgate-audit"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["audit", "scan", "--watch"] and ("--publish" in args) == publish


@pytest.mark.parametrize("snapshot", [True, False])
def test_the_report_writer_may_list_the_cluster_for_its_snapshot_and_no_more(snapshot: bool):
    from webhook.background.scan import SCANNED

    objects = render({"reportWriter": {"snapshot": snapshot}})
    roles = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "vgate-report-writer"]
    [cronjob] = [o for o in objects if o["kind"] == "CronJob"]
    token = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["automountServiceAccountToken"]
    assert token is snapshot and bool(roles) is snapshot  # applyPolicyReports off: only the snapshot needs them
    if snapshot:
        allowed = {(g, r, v) for rule in roles[0]["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                   for v in rule["verbs"]}
        assert all((kind.group, kind.resource, "list") in allowed for kind in SCANNED)
        assert not {v for _, _, v in allowed} - {"get", "list"}  # read-only
