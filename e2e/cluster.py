"""`e2e/cluster up|down|status|build`: a real control plane on loopback with vgate in front of it.

etcd, kube-apiserver, kube-controller-manager, Volcano's webhook-manager, controller-manager and
scheduler, kwok (fake Nodes whose pods become Running) and `vgate serve` from this checkout, each
a process of its own, started in dependency order and waited for by its readiness endpoint.
`up --pods` runs vgate instead as the chart's pods (two replicas of its Deployment from the image
built from the Dockerfile, behind HAProxy: e2e/pods.py), sharing with the tests the folders they
read and edit (policies, the audit claim); the functions below that stop, start, renew, reconfigure
or ask vgate do so in either mode.
Everything Volcano and vgate install into the cluster comes from their Helm charts as Helm renders
them (Volcano's chart from its module, vgate's from charts/vgate); only the webhooks' clientConfig
becomes a URL on 127.0.0.1, because without kube-proxy no Service address routes.

State lives in .e2e/ (ignored): bin/ (the build), run/ (certificates, etcd data, logs, pids, made
anew by every `up`), kubeconfig (cluster admin).
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from e2e import build, charts, collectors, pki
from e2e.waiting import eventually

if TYPE_CHECKING:  # e2e.pods imports this module: imported where used
    from e2e.pods import PodRelease

ROOT = build.ROOT
STATE = ROOT / ".e2e"
RUN = STATE / "run"
KUBECONFIG = STATE / "kubeconfig"
HOST = "127.0.0.1"

ETCD_PORT, ETCD_PEER_PORT = 23790, 23800
APISERVER_PORT = 16443
KCM_PORT = 16257
VOLCANO_WEBHOOK_PORT = 16444
VGATE_PORT, VGATE_METRICS_PORT = 16446, 16447
COLLECTOR_PORT = 16448  # rsyslog (RELP over TLS, mutual): the audit system vgate forwards its decision log to
VGATE_PODS_HTTPS, VGATE_PODS_PROBES, VGATE_PODS_API_RELAY = 16490, 16492, 16494  # `up --pods`: replica i at +i
APISERVER = f"https://{HOST}:{APISERVER_PORT}"
VGATE_URL = f"https://{HOST}:{VGATE_PORT}"
POD_CIDR = "127.16.0.0/16"  # where kwok gives pods their addresses
PODMAN_GATEWAY = "10.88.0.1"  # the host on podman's default network: the chart's pods reach the API server there

# Fake nodes kwok keeps Ready: two zones, memory-encrypted (SEV-SNP) or not, one GPU node
# tainted for a tenant; names say what each one is.
NODES: list[dict[str, Any]] = [
    {"name": "zone-a-sev-1", "zone": "zone-a", "encrypted": True},
    {"name": "zone-a-sev-2", "zone": "zone-a", "encrypted": True},
    {"name": "zone-a-plain-1", "zone": "zone-a", "encrypted": False},
    {"name": "zone-b-sev-1", "zone": "zone-b", "encrypted": True},
    {"name": "zone-b-gpu-1", "zone": "zone-b", "encrypted": False, "gpus": 8,
     "taints": [{"key": "dedicated", "value": "serving", "effect": "NoSchedule"}]},
]


@dataclass
class Component:
    """One process of the control plane: its command, and how to tell it is ready."""

    name: str
    command: list[str]
    ready: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def pid_file(self) -> Path:
        return RUN / "pids" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return RUN / "logs" / f"{self.name}.log"

    def start(self, timeout: float = 120) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=RUN, env={**os.environ, **self.env}, start_new_session=True)
        self.pid_file.write_text(str(process.pid))
        deadline = time.monotonic() + timeout
        while not self.ready():
            if process.poll() is not None:
                raise SystemExit(f"e2e: {self.name} exited {process.returncode}; last lines of {self.log_file}:\n"
                                 + _tail(self.log_file))
            if time.monotonic() > deadline:
                raise SystemExit(f"e2e: {self.name} not ready in {timeout:.0f} s; last lines of {self.log_file}:\n"
                                 + _tail(self.log_file))
            time.sleep(0.3)


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"


def _https_ok(url: str, ca: Path, cert: tuple[Path, Path] | None = None) -> bool:
    context = ssl.create_default_context(cafile=str(ca))
    if cert:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with urllib.request.urlopen(url, context=context, timeout=3) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def http_ok(url: str, *, verify: bool = True) -> bool:
    """Whether ``url`` answers 200 now. ``verify=False`` for a server with a CA of its own (Kyverno
    registers its webhooks with one it makes itself)."""
    context = None
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def kubectl(*args: str, input_text: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The built kubectl (the cluster's own minor) against the admin kubeconfig."""
    return subprocess.run([str(build.BIN / "kubectl"), "--kubeconfig", str(KUBECONFIG), *args], input=input_text,
                          capture_output=True, text=True, check=check)


def apply(objects: list[dict[str, Any]]) -> None:
    if objects:
        result = kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=e2e-cluster", "-f", "-",
                         input_text=yaml.safe_dump_all(objects), check=False)
        if result.returncode:
            raise SystemExit(f"e2e: kubectl apply failed:\n{result.stderr}")


def _kubeconfig(path: Path, ca: Path, cert: tuple[Path, Path], user: str) -> Path:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
        "clusters": [{"name": "e2e", "cluster": {"server": APISERVER, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert[0]), "client-key": str(cert[1])}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def identity_kubeconfig(name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
    """A kubeconfig that authenticates as ``user`` in ``groups`` (a client certificate of the cluster's CA)."""
    ca = pki.Authority(RUN / "pki", "e2e-ca")
    cert = ca.issue(RUN / "pki" / "clients", name, user, organizations=groups)
    return _kubeconfig(RUN / f"{name}.kubeconfig", ca.cert_path, cert, user)


def service_account_user(namespace: str, name: str) -> tuple[str, tuple[str, ...]]:
    """How RBAC knows a service account: a client certificate with this subject is that account."""
    return (f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"))


def _with_url(configuration: dict[str, Any], base_url: str, ca_bundle: str) -> dict[str, Any]:
    """A webhook configuration routed to ``base_url`` + each webhook's service path (no kube-proxy here)."""
    for webhook in configuration["webhooks"]:
        service = webhook["clientConfig"].pop("service")
        webhook["clientConfig"] = {"url": base_url + service.get("path", "/"), "caBundle": ca_bundle}
    return configuration


def up(pods: bool = False) -> None:
    """Starts the whole control plane, fresh; returns when vgate's webhooks are registered.
    ``pods``: vgate as the chart's pods (the image built first) instead of a process of this checkout."""
    down(quiet=True)
    binaries = build.build()
    shutil.rmtree(RUN, ignore_errors=True)
    (RUN / "pki").mkdir(parents=True)
    ca = pki.Authority(RUN / "pki", "e2e-ca")
    serving = ca.issue(RUN / "pki", "serving", "127.0.0.1", hosts=(HOST, "localhost", "kubernetes",
                                                                     "kubernetes.default.svc", PODMAN_GATEWAY))
    sa_key, sa_pub = pki.signing_key_pair(RUN / "pki")
    admin = ca.issue(RUN / "pki" / "clients", "admin", "kubernetes-admin", organizations=("system:masters",))
    _kubeconfig(KUBECONFIG, ca.cert_path, admin, "kubernetes-admin")

    Component("etcd", [
        str(binaries / "etcd"), "--name=e2e", f"--data-dir={RUN / 'etcd'}",
        f"--listen-client-urls=http://{HOST}:{ETCD_PORT}", f"--advertise-client-urls=http://{HOST}:{ETCD_PORT}",
        f"--listen-peer-urls=http://{HOST}:{ETCD_PEER_PORT}",
        f"--initial-advertise-peer-urls=http://{HOST}:{ETCD_PEER_PORT}",
        f"--initial-cluster=e2e=http://{HOST}:{ETCD_PEER_PORT}", "--unsafe-no-fsync",
        f"--listen-metrics-urls=http://{HOST}:{ETCD_PORT + 1}",
    ], lambda: http_ok(f"http://{HOST}:{ETCD_PORT}/health")).start()

    apiserver_ready = lambda: _https_ok(f"{APISERVER}/readyz", ca.cert_path, admin)  # noqa: E731
    Component("kube-apiserver", [
        str(binaries / "kube-apiserver"), f"--etcd-servers=http://{HOST}:{ETCD_PORT}",
        f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={APISERVER_PORT}",
        f"--tls-cert-file={serving[0]}", f"--tls-private-key-file={serving[1]}",
        f"--client-ca-file={ca.cert_path}", "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={APISERVER}", f"--service-account-key-file={sa_pub}",
        f"--service-account-signing-key-file={sa_key}",
        # Only an allocation range for ClusterIPs: nothing routes to it (no kube-proxy) and no test sends there.
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true", "--profiling=false",
        # The default admission plugins stay on (NamespaceLifecycle, LimitRanger, ServiceAccount, Priority,
        # DefaultTolerationSeconds, PodSecurity, MutatingAdmissionWebhook, ValidatingAdmissionWebhook, ...);
        # NodeRestriction is added, as kubeadm adds it: a node's identity writes its own Node and pods only.
        "--enable-admission-plugins=NodeRestriction",
    ], apiserver_ready).start(timeout=180)
    _write_component_kubeconfigs(ca)

    volcano = charts.volcano_objects()
    admin_tiers = charts.admin_network_policy_crds()
    apply([*volcano.cluster_setup, *admin_tiers])
    wait_established([o["metadata"]["name"] for o in [*volcano.cluster_setup, *admin_tiers]
                       if o["kind"] == "CustomResourceDefinition"])

    Component("kube-controller-manager", [
        str(binaries / "kube-controller-manager"), f"--kubeconfig={RUN / 'kcm.kubeconfig'}",
        f"--authentication-kubeconfig={RUN / 'kcm.kubeconfig'}", f"--authorization-kubeconfig={RUN / 'kcm.kubeconfig'}",
        f"--bind-address={HOST}", f"--secure-port={KCM_PORT}", "--leader-elect=false",
        f"--service-account-private-key-file={sa_key}", f"--root-ca-file={ca.cert_path}",
        "--use-service-account-credentials=true",
        # No cloud, no node IPAM (kwok gives pods their addresses), no kube-proxy.
        "--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle,-persistentvolume-binder",
    ], _controllers_working).start()

    _start_volcano(binaries, ca, volcano)
    _start_kwok(binaries)
    _start_vgate(pods)
    print(f"e2e: up; export KUBECONFIG={KUBECONFIG}", file=sys.stderr)


def _controllers_working() -> bool:
    """kube-controller-manager serves /healthz on a certificate of its own making; ask the API server
    instead: its service-account controller has made the default account in kube-system."""
    return kubectl("-n", "kube-system", "get", "serviceaccount", "default", check=False).returncode == 0


def _write_component_kubeconfigs(ca: pki.Authority) -> None:
    clients = RUN / "pki" / "clients"
    cert = ca.issue(clients, "kcm", "system:kube-controller-manager")
    _kubeconfig(RUN / "kcm.kubeconfig", ca.cert_path, cert, "system:kube-controller-manager")


def wait_established(crds: list[str]) -> None:
    """Each CRD served."""
    wait_condition("crd", crds, "Established")


def wait_condition(kind: str, names: list[str], condition: str, timeout: float = 60) -> None:
    """Each named object of ``kind`` with ``condition`` True. Polled: `kubectl wait` errors on an
    object whose status is not set yet."""
    def holds(name: str) -> bool:
        found = kubectl("get", kind, name, "-o", "json", check=False)
        conditions = (json.loads(found.stdout).get("status") or {}).get("conditions") or [] if found.returncode == 0 \
            else []
        return any(c.get("type") == condition and c.get("status") == "True" for c in conditions)

    for name in names:
        if not eventually(functools.partial(holds, name), timeout=timeout):
            raise SystemExit(f"e2e: {kind} {name} not {condition} within {timeout:.0f} s")


def _start_volcano(binaries: Path, ca: pki.Authority, volcano: charts.VolcanoObjects) -> None:
    clients, config = RUN / "pki" / "clients", RUN / "volcano"
    config.mkdir(parents=True, exist_ok=True)
    kubeconfigs = {}
    for component, account in (("admission", "volcano-admission"), ("controllers", "volcano-controllers"),
                               ("scheduler", "volcano-scheduler")):
        user, groups = service_account_user(charts.VOLCANO_NAMESPACE, account)
        cert = ca.issue(clients, f"volcano-{component}", user, organizations=groups)
        kubeconfigs[component] = _kubeconfig(config / f"{component}.kubeconfig", ca.cert_path, cert, user)
    serving = ca.issue(config, "webhook", HOST, hosts=(HOST,))
    bundle = base64.b64encode(ca.cert_path.read_bytes()).decode()
    base = f"https://{HOST}:{VOLCANO_WEBHOOK_PORT}"
    apply([_with_url(c, base, bundle) for c in volcano.webhook_configurations])
    for name, text in volcano.files.items():
        (config / name).write_text(text)

    Component("vc-webhook-manager", [
        str(binaries / "vc-webhook-manager"), f"--kubeconfig={kubeconfigs['admission']}",
        *charts.args_without(volcano.args["admission"], "--tls-", "--ca-cert-file", "--admission-conf",
                             "--webhook-namespace", "--webhook-service-name", "--port", "2>&1"),
        f"--tls-cert-file={serving[0]}", f"--tls-private-key-file={serving[1]}", f"--ca-cert-file={ca.cert_path}",
        f"--admission-conf={config / 'volcano-admission.conf'}", f"--webhook-url={base}",
        f"--listen-address={HOST}", f"--port={VOLCANO_WEBHOOK_PORT}", f"--healthz-address={HOST}:16451",
    ], lambda: _https_ok(f"https://{HOST}:16451/healthz", ca.cert_path)).start()  # on its webhook certificate
    Component("vc-controller-manager", [
        str(binaries / "vc-controller-manager"), f"--kubeconfig={kubeconfigs['controllers']}",
        *charts.args_without(volcano.args["volcano-controllers"], "2>&1"),
        f"--healthz-address={HOST}:16452", f"--listen-address={HOST}:16453",
    ], lambda: http_ok(f"http://{HOST}:16452/healthz")).start()
    Component("vc-scheduler", [
        str(binaries / "vc-scheduler"), f"--kubeconfig={kubeconfigs['scheduler']}",
        *charts.args_without(volcano.args["volcano-scheduler"], "--scheduler-conf", "2>&1"),
        f"--scheduler-conf={config / 'volcano-scheduler.conf'}",
        f"--healthz-address={HOST}:16454", f"--listen-address={HOST}:16455",
    ], lambda: http_ok(f"http://{HOST}:16454/healthz")).start()
    # The scheduler creates the default and root queues at start; tests need them.
    deadline = time.monotonic() + 60
    while kubectl("get", "queue", "default", check=False).returncode:
        if time.monotonic() > deadline:
            raise SystemExit("e2e: Volcano's default queue did not appear")
        time.sleep(0.5)


def node_objects() -> list[dict[str, Any]]:
    nodes = []
    for spec in NODES:
        labels = {"kubernetes.io/hostname": spec["name"], "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "topology.kubernetes.io/zone": spec["zone"], "type": "kwok"}
        if spec["encrypted"]:
            labels["node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"] = "true"
        capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
        if spec.get("gpus"):
            capacity["nvidia.com/gpu"] = str(spec["gpus"])
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": spec["name"], "labels": labels,
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": spec.get("taints", [])},
            "status": {"capacity": capacity, "allocatable": capacity},
        })
    return nodes


def _start_kwok(binaries: Path) -> None:
    Component("kwok", [
        str(binaries / "kwok"), f"--kubeconfig={KUBECONFIG}",
        "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--node-ip=127.0.0.1", f"--cidr={POD_CIDR}", f"--server-address={HOST}:16456",
        # Node leases, renewed every 10 s: without them a node's only heartbeat is its status, every
        # 20-45 s, and under a 1,000-pod gang (bench/gang.py) it came later than the node lifecycle
        # controller's 50 s grace: nodes NotReady, their pods evicted mid-gang.
        "--node-lease-duration-seconds=40",
    ], lambda: http_ok(f"http://{HOST}:16456/healthz")).start()
    apply(node_objects())
    kubectl("wait", "--for=condition=Ready", "--timeout=90s", "node", "--all")


VGATE_DIR = RUN / "vgate"
VGATE_CLI = [sys.executable, "-m", "webhook"]


def readiness() -> dict[str, Any]:
    """vgate's /readyz on its probe port (policy revision, last reload), or {} while it does not answer.
    With the chart's pods: the replica that reloaded least recently ({} while any does not answer),
    so that a test waiting for a reload waits for every replica."""
    bodies = [_readyz(port) for port in _probe_ports()]
    if not all(bodies):
        return {}
    return min(bodies, key=lambda body: str((body.get("lastReload") or {}).get("at")))


def _readyz(port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=3) as response:
            body: dict[str, Any] = json.loads(response.read())
            return body
    except (OSError, ValueError):
        return {}


def _probe_ports() -> list[int]:
    return [VGATE_PODS_PROBES + index for index in range(2)] if pods_mode() else [VGATE_METRICS_PORT]


def vgate_metrics() -> str:
    """vgate's /metrics (every replica's, one after the other, with the chart's pods)."""
    texts = []
    for port in _probe_ports():
        with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as response:
            texts.append(response.read().decode())
    return "".join(texts)


COLLECTOR_DIR = RUN / "collector"


def collector(server: str = "server") -> collectors.Rsyslog:
    """The audit system of this control plane: rsyslog with imrelp over TLS on COLLECTOR_PORT, writing
    every message it receives to collected.log; ``server`` names the certificate it presents."""
    rsyslog = collectors.Rsyslog(COLLECTOR_DIR, "relp+tls", COLLECTOR_DIR / "pki", server=server)
    rsyslog.port = COLLECTOR_PORT
    return rsyslog


def collector_component(server: str = "server") -> Component:
    rsyslog = collector(server)
    # a SIGKILLed rsyslogd leaves its pid file, and refuses to start while that pid is alive (reused)
    (COLLECTOR_DIR / "pid").unlink(missing_ok=True)
    config = COLLECTOR_DIR / "rsyslog.conf"
    config.write_text(rsyslog.config_text())
    return Component("collector", [collectors.RSYSLOGD, "-n", "-f", str(config), "-i", str(COLLECTOR_DIR / "pid")],
                     lambda: listening(COLLECTOR_PORT))


def listening(port: int) -> bool:
    """Whether something accepts connections on ``port`` of this host's loopback."""
    try:
        socket.create_connection((HOST, port), timeout=0.3).close()
    except OSError:
        return False
    return True


def _start_collector() -> dict[str, Any]:
    """Start the collector (its PKI made once) and return the audit.forward vgate is given. The
    chart's pods reach it at the podman bridge's gateway; its certificate names that address too."""
    (COLLECTOR_DIR / "work").mkdir(parents=True, exist_ok=True)
    if not (COLLECTOR_DIR / "pki" / "client.key").exists():
        collectors.make_pki(COLLECTOR_DIR / "pki", addresses=(PODMAN_GATEWAY,))
    collector_component().start()
    tls = COLLECTOR_DIR / "pki"
    return {"url": FORWARD_URL, "caFile": str(tls / "ca.pem"),
            "certFile": str(tls / "client.pem"), "keyFile": str(tls / "client.key")}


def vgate_component() -> Component:
    """`vgate serve` from this checkout, configured as the chart configures its pods."""
    workdir = VGATE_DIR
    return Component("vgate", [
        *VGATE_CLI, "serve", f"--config={workdir / 'vgate.yaml'}",
        f"--policies={workdir / 'policies'}", f"--certs={workdir / 'certs'}", f"--bind={HOST}:{VGATE_PORT}",
        "--workers=2", f"--metrics-bind={HOST}:{VGATE_METRICS_PORT}", "--no-hourly-reports",
    ], lambda: http_ok(f"http://{HOST}:{VGATE_METRICS_PORT}/readyz"),
        env={"PYTHONPATH": str(ROOT), "VGATE_REPLICA": "e2e"})


# This cluster's addresses: kwok gives pods addresses in 127.16.0.0/16 (its --cidr); 10.0.0.0/8 is
# taken to be the datacenter's own. An address range reaching the pod network reaches every pod.
EGRESS_VALUES = {"config": {"placement": {"egress": {"internalCIDRs": ["10.0.0.0/8", POD_CIDR],
                                                      "podCIDRs": [POD_CIDR]}}}}


def deny_egress_policy(namespace: str) -> dict[str, Any]:
    """What a platform team puts in each tenant namespace: pods labelled vgate.io/egress=deny reach
    only the cluster's DNS (vgate refuses a sensitive pod no such policy confines)."""
    dns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
           "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "deny-egress", "namespace": namespace},
            "spec": {"podSelector": {"matchLabels": {"vgate.io/egress": "deny"}}, "policyTypes": ["Egress"],
                     "egress": [{"to": [dns], "ports": [{"protocol": "UDP", "port": 53}]}]}}


def _vgate_values(pods: bool) -> dict[str, Any]:
    """The values this control plane installs vgate's chart with: its CA given (the certificate
    `vgate certs` made), its webhooks at VGATE_URL; with the chart's pods, the image built here, two
    replicas and the collector's Secrets (their files given to the pods by the harness)."""
    bundle = base64.b64encode((VGATE_DIR / "certs" / "ca.crt").read_bytes()).decode()
    values = {"tls": {"caBundle": bundle}, "webhooks": {"url": VGATE_URL}, **EGRESS_VALUES}
    if pods:
        from e2e import pods as chart_pods
        repository, tag = chart_pods.IMAGE.rsplit(":", 1)
        values |= {"image": {"repository": repository, "tag": tag}, "replicaCount": 2,
                   "audit": {"forward": {"url": FORWARD_URL_FROM_PODS,
                                         "caSecret": "vgate-collector-ca", "clientSecret": "vgate-collector-client"}}}
    return values


def vgate_webhook_configurations() -> list[dict[str, Any]]:
    """vgate's two webhook configurations as the chart renders them, routed to 127.0.0.1."""
    return charts.vgate_objects(_vgate_values(pods_mode())).webhook_configurations


PODS_MODE = RUN / "pods-mode"  # present while vgate runs as the chart's pods
FORWARD_URL = f"relp+tls://localhost:{COLLECTOR_PORT}"  # the collector, from this host
FORWARD_URL_FROM_PODS = f"relp+tls://{PODMAN_GATEWAY}:{COLLECTOR_PORT}"  # the collector, from the podman bridge


def pods_mode() -> bool:
    """Whether this control plane's vgate is the chart's pods (`up --pods`)."""
    return PODS_MODE.exists()


def _tls_secret() -> dict[str, bytes]:
    """The Secret of the given-CA install: what `vgate certs` wrote, as the operator would store it."""
    return {name: (VGATE_DIR / "certs" / name).read_bytes() for name in ("tls.crt", "tls.key", "ca.crt")}


@functools.cache
def vgate_release() -> PodRelease:
    """The chart's pods of this control plane: release "vgate" rendered with
    this control plane's values, HAProxy on VGATE_PORT, the policies folder the tests edit shared,
    the TLS and collector Secrets' files given, a 1 GiB audit claim (the whole suite's decisions)."""
    from e2e import pods as chart_pods
    objects = charts.render(ROOT / "charts" / "vgate", "vgate", charts.VGATE_NAMESPACE, _vgate_values(pods=True))
    tls = COLLECTOR_DIR / "pki"
    secrets = {"vgate-tls": _tls_secret(), "vgate-collector-ca": {"ca.crt": (tls / "ca.pem").read_bytes()},
               "vgate-collector-client": {"tls.crt": (tls / "client.pem").read_bytes(),
                                          "tls.key": (tls / "client.key").read_bytes()}}
    return chart_pods.PodRelease(objects, "vgate", VGATE_PORT, VGATE_PODS_HTTPS, VGATE_PODS_PROBES,
                                 api_relay_port=VGATE_PODS_API_RELAY, folders={"policies": VGATE_DIR / "policies"},
                                 secrets=secrets, audit_claim_bytes=1024 * 1024 * 1024)


def forward_url() -> str:
    """Where vgate forwards its decision log (the delivery cursors are kept by this URL)."""
    return FORWARD_URL_FROM_PODS if pods_mode() else FORWARD_URL


def stop_vgate() -> None:
    """vgate stopped (the process, or every replica with HAProxy left up): the webhooks unreachable."""
    if pods_mode():
        vgate_release().stop_replicas()
    else:
        stop("vgate")


def start_vgate() -> None:
    """vgate started again, returning once it is ready."""
    if pods_mode():
        vgate_release().start_replicas()
    else:
        vgate_component().start()


def vgate_running() -> bool:
    return vgate_release().running() if pods_mode() else running("vgate")


def renew_vgate_certificate() -> bytes:
    """A new serving certificate from the kept CA (`vgate certs`), where vgate reads it (with the
    chart's pods: the TLS Secret updated, as the kubelet then projects it); its PEM."""
    subprocess.run([*VGATE_CLI, "certs", "--out", str(VGATE_DIR / "certs"), "--ca-dir", str(VGATE_DIR / "certs.ca")],
                   check=True, capture_output=True, cwd=ROOT)
    if pods_mode():
        vgate_release().replace_secret("vgate-tls", _tls_secret())
    return (VGATE_DIR / "certs" / "tls.crt").read_bytes()


HOST_CONFIG = VGATE_DIR / "vgate.yaml"  # vgate.yaml with this host's paths: what the CLI in tests reads


def vgate_configs() -> list[Path]:
    """Every vgate.yaml vgate serves from: the host's (the process's), or, with the chart's pods,
    the host's (for the CLI) and the pods' (the ConfigMap's, with the pods' paths)."""
    return [HOST_CONFIG, vgate_release().folder("config") / "vgate.yaml"] if pods_mode() else [HOST_CONFIG]


def write_vgate_config(path: Path, text: str) -> None:
    """``path`` replaced at once: a projected ConfigMap's file by a new ``..data``, else by a rename."""
    if (path.parent / "..data").is_symlink():
        charts.project({path.name: text}, path.parent)
        return
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def _start_vgate(pods: bool) -> None:
    workdir = VGATE_DIR
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run([*VGATE_CLI, "certs", "--out", str(workdir / "certs"),
                    "--ca-dir", str(workdir / "certs.ca")], check=True, capture_output=True, cwd=ROOT)
    if pods:
        from e2e import pods as chart_pods
        print(f"e2e: image {chart_pods.build_image()}", file=sys.stderr)
    vgate = charts.vgate_objects(_vgate_values(pods))
    # vgate watches the cluster as its pod would: as the chart's ServiceAccount, with the chart's RBAC
    # (applied first, with the rest of the chart's cluster objects, before vgate starts and lists).
    watcher = identity_kubeconfig("vgate-cluster-state", *service_account_user(charts.VGATE_NAMESPACE, "vgate"))
    config = {**vgate.config, "cluster": {**vgate.config.get("cluster", {}), "kubeconfig": str(watcher)}}
    forward = _start_collector()  # every decision of every e2e test goes to the audit system
    local = yaml.safe_load(charts.local_config(config, workdir))
    local["audit"]["forward"] = forward
    HOST_CONFIG.write_text(yaml.safe_dump(local, sort_keys=False))
    charts.project(vgate.policies, workdir / "policies")
    (workdir / "exceptions").mkdir(exist_ok=True)
    apply(vgate.cluster_setup)
    if pods:
        PODS_MODE.touch()
        release = vgate_release()
        release.start()
        (workdir / "audit").symlink_to(release.audit_dir)  # the shared claim, where the tests read decisions
    else:
        vgate_component().start()
    apply(vgate.webhook_configurations)


def stop(name: str) -> None:
    """Stops one component (its whole process group): SIGTERM, then SIGKILL after 10 s."""
    pid_file = RUN / "pids" / f"{name}.pid"
    pid = int(pid_file.read_text())
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink()
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)
    pid_file.unlink()


def down(quiet: bool = False) -> None:
    """Stops every process `up` started (the pid files say which), newest first, and the chart's pods."""
    from e2e import pods as chart_pods
    chart_pods.remove_all()
    pids = RUN / "pids"
    if not pids.is_dir():
        return
    for pid_file in sorted(pids.glob("*.pid"), key=lambda p: p.stat().st_mtime, reverse=True):
        stop(pid_file.stem)
        if not quiet:
            print(f"e2e: stopped {pid_file.stem}", file=sys.stderr)


def running(name: str) -> bool:
    """Whether component ``name`` was started into this control plane and still runs."""
    pid_file = RUN / "pids" / f"{name}.pid"
    return pid_file.exists() and _alive(int(pid_file.read_text()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A child of ours that exited but was not reaped (the `up` process is gone) is not running.
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


def status() -> int:
    pids = RUN / "pids"
    states = {p.stem: running(p.stem) for p in sorted(pids.glob("*.pid"))} if pids.is_dir() else {}
    if pods_mode():
        states["vgate (the chart's pods)"] = vgate_running()
    print(json.dumps(states, indent=1))
    return 0 if states and all(states.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="e2e/cluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status", "build"])
    parser.add_argument("--pods", action="store_true",
                        help="up: vgate as the chart's pods (podman, the image built from the Dockerfile)")
    args = parser.parse_args(argv)
    if args.command == "up":
        up(pods=args.pods)
    elif args.command == "down":
        down()
    elif args.command == "build":
        build.build()
    else:
        return status()
    return 0


if __name__ == "__main__":
    sys.exit(main())
