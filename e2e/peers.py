"""Gatekeeper and Kyverno beside vgate in the e2e control plane, for bench/peers.py.

Each peer runs as its own release installs it, out of cluster: its CRDs, RBAC and configuration from
the install manifest in its Go module (Deployments and Services left out: the binary runs here as a
process, as the e2e suite runs Volcano and vgate), authenticated as its own ServiceAccount, its
webhook configurations routed by URL to 127.0.0.1 (no kube-proxy). Gatekeeper: cert rotation off, a
serving certificate of the e2e CA in --cert-dir, its shipped webhook configurations with the URL
swapped in. Kyverno: `--serverIP`, so it registers its own webhooks by URL with its own CA.

Who judges a pod is decided by namespace: every webhook of vgate, Gatekeeper and Kyverno is scoped
to namespaces labelled `bench.vgate.io/target=<its name>`, so one cluster holds all three and a
bench round picks one by creating its pods in that namespace (`none`: no policy webhook at all,
only Volcano's). `restore_vgate()` puts vgate's own registrations back for the e2e suite.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import yaml

from e2e import build, charts, cluster, pki

TARGET_LABEL = "bench.vgate.io/target"
# vgate-validate: vgate's validating webhooks alone (no mutation); kyverno and gatekeeper: their
# validation policies alone. The whole job (vgate's mutation too): vgate, kyverno-whole and
# gatekeeper-whole, the peers given the same mutation (their mutate rules and mutators, from the same
# namespace-to-queue mapping).
TARGETS = ("none", "vgate", "vgate-validate", "kyverno", "kyverno-whole", "gatekeeper", "gatekeeper-whole")
WHOLE_JOB = ("vgate", "kyverno-whole", "gatekeeper-whole")
GATEKEEPER_PORT, GATEKEEPER_HEALTH_PORT, GATEKEEPER_METRICS_PORT = 16460, 16461, 16462
KYVERNO_PORT, KYVERNO_METRICS_PORT = 16463, 16464
GATEKEEPER_MODULE = "github.com/open-policy-agent/gatekeeper/v3"
KYVERNO_MODULE = "github.com/kyverno/kyverno"
POLICIES = build.ROOT / "bench" / "peers"

# gatekeeper-library's pod-security-policy templates the Pod Security Standards' restricted level
# needs (the constraints with restricted's parameters are in bench/peers/gatekeeper-constraints.yaml).
GATEKEEPER_LIBRARY_TEMPLATES = (
    "allow-privilege-escalation", "apparmor", "capabilities", "forbidden-sysctls", "host-filesystem",
    "host-namespaces", "host-network-ports", "host-process", "host-probes-lifecycle", "privileged-containers",
    "proc-mount", "seccompv2", "selinux", "users", "volumes",
)


def bench_namespace(target: str) -> str:
    """The namespace a round of ``target`` creates its pods in (secure-*: vgate holds it to restricted)."""
    return f"secure-bench-{target}"


def _scope(selector: dict[str, Any] | None, *targets: str) -> dict[str, Any]:
    selector = copy.deepcopy(selector or {})
    expressions = [e for e in selector.get("matchExpressions") or [] if e.get("key") != TARGET_LABEL]
    selector["matchExpressions"] = [*expressions, {"key": TARGET_LABEL, "operator": "In", "values": list(targets)}]
    return selector


def scoped(configuration: dict[str, Any], *targets: str) -> dict[str, Any]:
    """A webhook configuration whose every webhook sees only the namespaces of ``targets``."""
    configuration = copy.deepcopy(configuration)
    for webhook in configuration["webhooks"]:
        webhook["namespaceSelector"] = _scope(webhook.get("namespaceSelector"), *targets)
    return configuration


def _manifest(name: str, module: str, path: str) -> list[dict[str, Any]]:
    """The objects of an install manifest in peer ``name``'s module (``path`` inside it)."""
    text = (charts.module_dir(module, build.MODULE / name) / path).read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def _authority() -> pki.Authority:
    return pki.Authority(cluster.RUN / "pki", "e2e-ca")


def namespaces() -> None:
    """One namespace per target, labelled for its webhooks' selectors, with the deny-egress policy a
    platform team puts in each tenant namespace (vgate refuses a sensitive pod nothing confines)."""
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": bench_namespace(t), "labels": {TARGET_LABEL: t}}} for t in TARGETS])
    cluster.apply([cluster.deny_egress_policy(bench_namespace(t)) for t in TARGETS])


def scope_vgate() -> None:
    """vgate's chart-rendered webhooks: all of them for the `vgate` target's namespace, the
    validating ones also for `vgate-validate`'s."""
    cluster.apply([scoped(c, "vgate") if c["kind"] == "MutatingWebhookConfiguration" else
                   scoped(c, "vgate", "vgate-validate") for c in cluster.vgate_webhook_configurations()])


def restore_vgate() -> None:
    cluster.apply(cluster.vgate_webhook_configurations())


def _stand_in_pod(namespace: str, name: str, image: str) -> None:
    """The Pod object a peer looks itself up as (Gatekeeper owns its status objects by it): kwok runs
    it on a node; the peer itself runs here, out of cluster."""
    cluster.apply([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                    "spec": {"nodeName": cluster.NODES[2]["name"], "containers": [{
                        "name": "manager", "image": image, "securityContext": {  # its namespace is restricted
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}]}}])


def start_gatekeeper(library: Path) -> None:
    """Gatekeeper's webhook (`--operation=webhook --operation=mutation-webhook`, as its chart runs
    its controller-manager) with the library's templates and restricted's constraints."""
    binary = build.build_peer("gatekeeper")
    objects = _manifest("gatekeeper", GATEKEEPER_MODULE, "deploy/gatekeeper.yaml")
    webhook_kinds = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    webhooks = [d for d in objects if d["kind"] in webhook_kinds]
    install = [d for d in objects if d["kind"] not in (
        *webhook_kinds, "Deployment", "Service", "Secret", "PodDisruptionBudget", "ResourceQuota")]
    cluster.apply(install)
    cluster.wait_established([o["metadata"]["name"] for o in install if o["kind"] == "CustomResourceDefinition"])
    _stand_in_pod("gatekeeper-system", "gatekeeper-bench", "openpolicyagent/gatekeeper:v3.23.1")
    workdir = cluster.RUN / "gatekeeper"
    certs = workdir / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    cert, key = _authority().issue(workdir, "serving", cluster.HOST, hosts=(cluster.HOST,))
    (certs / "tls.crt").write_bytes(cert.read_bytes())
    (certs / "tls.key").write_bytes(key.read_bytes())
    kubeconfig = cluster.identity_kubeconfig(
        "gatekeeper", *cluster.service_account_user("gatekeeper-system", "gatekeeper-admin"))
    cluster.Component("gatekeeper", [
        str(binary), f"--kubeconfig={kubeconfig}", f"--port={GATEKEEPER_PORT}", f"--host={cluster.HOST}",
        f"--cert-dir={certs}", "--disable-cert-rotation", "--logtostderr", "--exempt-namespace=gatekeeper-system",
        # the controller-manager's operations, and `generate` (the constraint CRDs from the templates), which
        # the chart gives its audit pod; audit itself is not run (as vgate's hourly reports are not here).
        "--operation=webhook", "--operation=mutation-webhook", "--operation=generate",
        "--disable-opa-builtin={http.send}",
        f"--health-addr={cluster.HOST}:{GATEKEEPER_HEALTH_PORT}",
        f"--metrics-addr={cluster.HOST}:{GATEKEEPER_METRICS_PORT}",
        "--shutdown-delay=0",
    ], lambda: cluster.http_ok(f"http://{cluster.HOST}:{GATEKEEPER_HEALTH_PORT}/readyz"),
        env={"POD_NAMESPACE": "gatekeeper-system", "POD_NAME": "gatekeeper-bench", "NAMESPACE": "gatekeeper-system",
             "CONTAINER_NAME": "manager"}).start(timeout=180)
    bundle = base64.b64encode(_authority().cert_path.read_bytes()).decode()
    base = f"https://{cluster.HOST}:{GATEKEEPER_PORT}"
    cluster.apply([scoped(cluster._with_url(c, base, bundle), "gatekeeper-whole")
                   if c["kind"] == "MutatingWebhookConfiguration" else
                   scoped(cluster._with_url(c, base, bundle), "gatekeeper", "gatekeeper-whole") for c in webhooks])
    templates = [yaml.safe_load((library / "library" / "pod-security-policy" / name / "template.yaml").read_text())
                 for name in GATEKEEPER_LIBRARY_TEMPLATES]
    templates.append(yaml.safe_load((POLICIES / "gatekeeper-placement-template.yaml").read_text()))
    cluster.apply(templates)
    kinds = [t["spec"]["crd"]["spec"]["names"]["kind"] for t in templates]
    cluster.wait_established([f"{k.lower()}.constraints.gatekeeper.sh" for k in kinds])
    cluster.apply([d for d in yaml.safe_load_all((POLICIES / "gatekeeper-constraints.yaml").read_text()) if d])
    cluster.apply(gatekeeper_mutators())


def queue_mapping() -> tuple[dict[str, str], str, dict[str, str], dict[str, int]]:
    """vgate's mapping, from its running config: namespace -> queue (queues.byNamespace), the queue of
    every other namespace (queues.default), queue -> priority class (queues.definitions) and class ->
    value (priorityClasses.values). What the peers' mutations are written from."""
    config = yaml.safe_load(cluster.HOST_CONFIG.read_text())
    queues = config["queues"]
    classes = {queue: definition["priorityClass"] for queue, definition in (queues.get("definitions") or {}).items()
               if definition.get("priorityClass")}
    return dict(queues.get("byNamespace") or {}), queues.get("default", "default"), classes, \
        dict(config["priorityClasses"]["values"])


def kyverno_queue_config_map() -> dict[str, Any]:
    """The ConfigMap bench/peers/kyverno-mutation.yaml looks the queue, class and value up in."""
    by_namespace, default, classes, values = queue_mapping()
    data = {"default": default, **{f"ns.{namespace}": queue for namespace, queue in by_namespace.items()},
            **{f"class.{queue}": name for queue, name in classes.items()},
            **{f"value.{name}": str(value) for name, value in values.items()}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "vgate-queues", "namespace": "kyverno"},
            "data": data}


def gatekeeper_mutators() -> list[dict[str, Any]]:
    """vgate's mutation as a Gatekeeper user writes it (mutators take constants): per queue, an
    AssignMetadata for its annotation and Assigns for its priority class (where the pod names none)
    and value, matched by the queue's namespaces (the default queue's: every other one); one Assign
    of schedulerName volcano. Gatekeeper's mutating webhook sees only the whole-job target."""
    by_namespace, default, classes, values = queue_mapping()
    pods = {"scope": "Namespaced", "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}
    mutators = [_assign("vgate-scheduler", pods, "spec.schedulerName", "volcano")]
    queues = {queue: [n for n, q in by_namespace.items() if q == queue] for queue in by_namespace.values()}
    for queue, namespaces in [*queues.items(), (default, [])]:
        match = {**pods, **({"namespaces": namespaces} if namespaces else {"excludedNamespaces": list(by_namespace)})}
        mutators.append({"apiVersion": "mutations.gatekeeper.sh/v1", "kind": "AssignMetadata",
                         "metadata": {"name": f"vgate-queue-{queue}"},
                         "spec": {"match": match, "location": 'metadata.annotations."scheduling.volcano.sh/queue-name"',
                                  "parameters": {"assign": {"value": queue}}}})
        if queue in classes:
            unset = [{"subPath": "spec.priorityClassName", "condition": "MustNotExist"}]
            name = classes[queue]
            mutators += [_assign(f"vgate-priority-class-{queue}", match, "spec.priorityClassName", name, unset),
                         _assign(f"vgate-priority-{queue}", match, "spec.priority", values[name])]
    return mutators


def _assign(name: str, match: dict[str, Any], location: str, value: Any,
            path_tests: list[dict[str, str]] | None = None) -> dict[str, Any]:
    parameters: dict[str, Any] = {"assign": {"value": value}, **({"pathTests": path_tests} if path_tests else {})}
    return {"apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign", "metadata": {"name": name},
            "spec": {"applyTo": [{"groups": [""], "kinds": ["Pod"], "versions": ["v1"]}], "match": match,
                     "location": location, "parameters": parameters}}


def start_kyverno() -> None:
    """Kyverno's admission controller with the install manifest's flags, registering its webhooks by
    URL (`--serverIP`) for the `kyverno` target's namespace, and the two ClusterPolicies."""
    binary = build.build_peer("kyverno")
    objects = _manifest("kyverno", KYVERNO_MODULE, "config/install-latest-testing.yaml")
    install = [d for d in objects if d["kind"] not in ("Deployment", "Service")]
    for item in install:
        if item["kind"] == "ConfigMap" and item["metadata"]["name"] == "kyverno":
            selector = json.loads(item["data"]["webhooks"])["namespaceSelector"]
            item["data"]["webhooks"] = json.dumps({"namespaceSelector": _scope(selector, "kyverno", "kyverno-whole")})
    cluster.apply(install)
    cluster.wait_established([o["metadata"]["name"] for o in install if o["kind"] == "CustomResourceDefinition"])
    args = next(d for d in objects if d["kind"] == "Deployment" and d["metadata"]["name"] ==
                "kyverno-admission-controller")["spec"]["template"]["spec"]["containers"][0]["args"]
    kept = charts.args_without(args, "--servicePort", "--webhookServerPort", "--metricsPort",
                               "--controllerRuntimeMetricsAddress", "--otelConfig")
    kubeconfig = cluster.identity_kubeconfig(
        "kyverno", *cluster.service_account_user("kyverno", "kyverno-admission-controller"))
    cluster.Component("kyverno", [
        str(binary), f"--kubeconfig={kubeconfig}", *kept, f"--serverIP={cluster.HOST}:{KYVERNO_PORT}",
        f"--webhookServerHost={cluster.HOST}", f"--webhookServerPort={KYVERNO_PORT}", f"--servicePort={KYVERNO_PORT}",
        f"--metricsPort={KYVERNO_METRICS_PORT}", "--otelConfig=prometheus", "--controllerRuntimeMetricsAddress=0",
    ], lambda: cluster.http_ok(f"https://{cluster.HOST}:{KYVERNO_PORT}/health/readiness", verify=False),
        env={"KYVERNO_NAMESPACE": "kyverno", "KYVERNO_POD_NAME": "kyverno-bench", "INIT_CONFIG": "kyverno",
             "METRICS_CONFIG": "kyverno-metrics", "KYVERNO_SERVICEACCOUNT_NAME": "kyverno-admission-controller",
             "KYVERNO_ROLE_NAME": "kyverno:admission-controller", "KYVERNO_SVC": "kyverno-svc",
             "KYVERNO_DEPLOYMENT": "kyverno-admission-controller", "TUF_ROOT": str(cluster.RUN / "kyverno-tuf")},
    ).start(timeout=180)
    cluster.apply([kyverno_queue_config_map()])
    policies = [d for name in ("kyverno-policies.yaml", "kyverno-mutation.yaml")
                for d in yaml.safe_load_all((POLICIES / name).read_text()) if d]
    cluster.apply(policies)
    cluster.wait_condition("clusterpolicy", [p["metadata"]["name"] for p in policies], "Ready", timeout=120)
