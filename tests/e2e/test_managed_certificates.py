"""vgate's own serving certificate, the chart's default install: made, trusted, renewed and moved to a
new CA while pods are admitted, through the real API server.

A second `vgate serve` (release "selfcert", on ports of its own) runs as the chart renders its pod with
default TLS values: no --certs, --tls-secret and --ca-inject instead, as the chart's ServiceAccount
with only the chart's RBAC (its Secret; its two webhook configurations). Its webhook configurations
are the chart's, each narrowed to one labelled namespace so the rest of the suite never calls it.
Lifetimes are shortened (a certificate of 40 s, a CA of 150 s) so that renewals and a new CA happen
within the test; the API server's validating webhook is failurePolicy Fail, so any handshake it
could not complete would be a refused pod.
"""

from __future__ import annotations

import base64
import datetime
import os
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from e2e import build, charts, cluster, records
from e2e.kube import Kube
from e2e.waiting import eventually

from helpers import RESTRICTED_SPEC, free_port

RELEASE, FULLNAME = "selfcert", "selfcert-vgate"
PORT, METRICS_PORT = 16449, 16450
NAMESPACE, LABEL = "selfcert-tenant", "vgate-e2e/selfcert"
# A certificate renewed every 15 s (40 - 25); a new CA every 50 s (150 - 100), signing only 30 s after
# it joined the bundle: longer than a renewal interval, so a CA that did not wait would be seen to.
LIFETIMES = {"validity": "40s", "renewBefore": "25s", "caValidity": "150s", "caRenewBefore": "100s",
             "caSettle": "30s"}
KEEPER_KINDS = ("ServiceAccount", "Secret", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
SECRET = f"{FULLNAME}-tls"


class Keeper:
    """The second vgate: its process, its rendered objects and its decision log."""

    def __init__(self, workdir: Path, objects: list[dict[str, Any]]) -> None:
        self.workdir, self.objects = workdir, objects
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def deployment(self) -> dict[str, Any]:
        return next(o for o in self.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == FULLNAME)

    def decisions(self) -> list[dict[str, Any]]:
        return [r for r in records.decisions(self.workdir / "audit") if r.get("namespace") == NAMESPACE]

    def log(self) -> str:
        return (self.workdir / "serve.log").read_text(errors="replace")


def serve_command(keeper: Keeper) -> list[str]:
    """The rendered pod's own arguments for its certificate, with this checkout's paths and ports."""
    args = keeper.deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    kept = [a for a in args if a.startswith(("--tls-", "--ca-"))]
    return [*cluster.VGATE_CLI, "serve", f"--config={keeper.workdir / 'vgate.yaml'}",
            f"--policies={keeper.workdir / 'policies'}", f"--bind={cluster.HOST}:{PORT}", "--workers=2",
            f"--metrics-bind={cluster.HOST}:{METRICS_PORT}", "--no-hourly-reports", "--reload-interval=1", *kept]


def start(keeper: Keeper, command: list[str]) -> None:
    log = (keeper.workdir / "serve.log").open("ab")
    environment = {"PYTHONPATH": str(build.ROOT), "PATH": "/usr/bin:/bin", "VGATE_REPLICA": "selfcert",
                   "HOME": str(keeper.workdir)}
    keeper.process = subprocess.Popen(command, cwd=build.ROOT, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, env=environment)


@pytest.fixture(scope="module")
def keeper(control_plane: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keeper]:
    kube = control_plane
    values = {"webhooks": {"url": f"https://{cluster.HOST}:{PORT}"}, "tls": {"selfManaged": LIFETIMES},
              "clusterState": {"enabled": False}, "priorityClasses": {"create": False}}
    objects = charts.render(build.ROOT / "charts" / "vgate", RELEASE, charts.VGATE_NAMESPACE, values)
    keeper = Keeper(tmp_path_factory.mktemp("selfcert"), objects)
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == f"{FULLNAME}-config")
    config = yaml.safe_load(config_map["data"]["vgate.yaml"])
    identity = cluster.identity_kubeconfig(FULLNAME, *cluster.service_account_user(charts.VGATE_NAMESPACE, FULLNAME))
    config["cluster"] = {**config.get("cluster", {}), "kubeconfig": str(identity)}
    (keeper.workdir / "vgate.yaml").write_text(charts.local_config(config, keeper.workdir))
    charts.project(charts.policy_files(objects, FULLNAME), keeper.workdir / "policies")
    (keeper.workdir / "exceptions").mkdir()
    setup = [o for o in objects if o["kind"] in KEEPER_KINDS]
    assert {o["kind"] for o in setup} == set(KEEPER_KINDS), "the chart's default install keeps its certificate"
    kube.run("delete", "secret", SECRET, "-n", charts.VGATE_NAMESPACE, "--ignore-not-found")
    result = kube.apply(*setup)
    assert result.ok, result.stderr
    start(keeper, serve_command(keeper))
    assert eventually(lambda: cluster.http_ok(f"http://{cluster.HOST}:{METRICS_PORT}/readyz"), timeout=90), \
        keeper.log()[-3000:]
    configurations = charts.narrowed_webhooks(objects, LABEL)  # Helm creates them last: after the pods started
    result = kube.apply(*configurations)
    assert result.ok, result.stderr
    kube.namespace(NAMESPACE, {LABEL: "true"})
    assert eventually(lambda: all(bundles(kube)), timeout=30), keeper.log()[-3000:]
    yield keeper
    if keeper.process:  # the master and its workers: none may stay on the port for the next run
        os.killpg(keeper.process.pid, signal.SIGTERM)
        try:
            keeper.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(keeper.process.pid, signal.SIGKILL)
            keeper.process.wait()
    for configuration in configurations:
        kube.run("delete", configuration["kind"].lower(), configuration["metadata"]["name"], "--ignore-not-found")
    kube.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")


def bundles(kube: Kube) -> list[str]:
    """Each webhook's caBundle in both of the release's configurations ("" where none is set)."""
    found = []
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        configuration = kube.get(kind, FULLNAME) or {"webhooks": [{}]}
        found += [w.get("clientConfig", {}).get("caBundle", "") for w in configuration["webhooks"]]
    return found


def secret_data(kube: Kube) -> dict[str, bytes]:
    secret = kube.get("secret", SECRET, charts.VGATE_NAMESPACE) or {}
    return {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}


def served_certificate() -> x509.Certificate:
    pem = ssl.get_server_certificate((cluster.HOST, PORT), timeout=5)
    return x509.load_pem_x509_certificate(pem.encode())


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "selfcert"}},
            "spec": {**RESTRICTED_SPEC}}


def test_the_pods_fill_the_empty_secret_and_both_webhook_configurations_trust_it(keeper: Keeper,
                                                                                 kube: Kube) -> None:
    data = secret_data(kube)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert set(bundles(kube)) == {base64.b64encode(data["ca.crt"]).decode()}
    served = served_certificate()
    assert served.public_bytes(Encoding.PEM) == data["tls.crt"]
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{FULLNAME}.{charts.VGATE_NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)
    result = kube.create(pod("trusted"), namespace=NAMESPACE, dry_run=True)
    assert result.ok, result.stderr
    assert eventually(lambda: {r["endpoint"] for r in keeper.decisions() if r.get("name") == "trusted"}
                      >= {"mutate", "validate"}), "the API server called the second vgate over its own TLS"


def test_the_service_account_may_touch_its_secret_and_its_two_configurations_only(keeper: Keeper,
                                                                                  kube: Kube) -> None:
    account = f"system:serviceaccount:{charts.VGATE_NAMESPACE}:{FULLNAME}"

    def can(*args: str) -> bool:
        return kube.run("auth", "can-i", f"--as={account}", *args).stdout.strip() == "yes"

    assert can("update", f"secret/{SECRET}", "-n", charts.VGATE_NAMESPACE)
    assert can("patch", f"validatingwebhookconfiguration/{FULLNAME}")
    assert can("patch", f"mutatingwebhookconfiguration/{FULLNAME}")
    assert not can("get", "secret/vgate-report-key", "-n", charts.VGATE_NAMESPACE)
    assert not can("create", "secrets", "-n", charts.VGATE_NAMESPACE)
    assert not can("list", "secrets", "-n", charts.VGATE_NAMESPACE)
    assert not can("patch", "validatingwebhookconfiguration/vgate")  # another release's: the cluster's gate
    assert not can("delete", f"validatingwebhookconfiguration/{FULLNAME}")
    assert not can("create", "validatingwebhookconfigurations")


# A machine that stands still longer than a certificate has left (renewBefore, 25 s) lets it expire with
# nothing running to renew it, and no keeper could do better: a rehearsal's VM stood still for 48 s once
# (the kernel said "crng reseeded due to virtual machine fork"; every component's log fell silent). A
# window in which the test's own loop saw a gap this long is not evidence: a new one is observed, once.
FROZEN_SECONDS = 20.0  # the loop below takes ~1-3 s a turn


@dataclass
class Window:
    """What 110 s of pod creations saw: each creation's outcome and the certificates and CAs served."""

    first_ca: x509.Certificate
    started: float  # time.monotonic()
    outcomes: list[tuple[str, int, str]] = field(default_factory=list)
    served: dict[int, x509.Name] = field(default_factory=dict)  # serial -> issuer
    expired: list[str] = field(default_factory=list)  # certificates served after they expired
    cas: set[int] = field(default_factory=set)
    trusted_since: dict[x509.Name, float] = field(default_factory=dict)  # CA -> first in the API server's caBundle
    signing_since: dict[x509.Name, float] = field(default_factory=dict)  # CA -> first served a certificate it signed
    frozen: float = 0.0  # the longest turn of the sampling loop, when over FROZEN_SECONDS


def observe(kube: Kube, seconds: float = 110) -> Window:
    """Pods created from two threads for ``seconds`` while the served certificate, the Secret's CAs and
    the webhook configurations' bundles are sampled each second."""
    api = cluster_api()
    window = Window(x509.load_pem_x509_certificates(secret_data(kube)["ca.crt"])[0], time.monotonic())
    stop = threading.Event()

    def create_pods(worker: int) -> None:
        count = 0
        while not stop.is_set():
            name = f"load-{worker}-{count}"
            response = api.session.post(f"{api.url}/api/v1/namespaces/{NAMESPACE}/pods", params={"dryRun": "All"},
                                        json=pod(name), timeout=30)
            window.outcomes.append((name, response.status_code,
                                    response.text[:300] if response.status_code >= 300 else ""))
            count += 1
            time.sleep(0.2)

    workers = [threading.Thread(target=create_pods, args=(n,)) for n in range(2)]
    for thread in workers:
        thread.start()
    last_turn = time.time()
    try:
        while time.monotonic() < window.started + seconds:
            certificate = served_certificate()
            now = time.monotonic()
            if certificate.not_valid_after_utc < datetime.datetime.now(datetime.timezone.utc):
                window.expired.append(f"{certificate.serial_number} (until {certificate.not_valid_after_utc:%T})")
            window.served[certificate.serial_number] = certificate.issuer
            window.signing_since.setdefault(certificate.issuer, now)
            window.cas |= {c.serial_number for c in x509.load_pem_x509_certificates(secret_data(kube)["ca.crt"])}
            for bundle in bundles(kube):
                for ca in x509.load_pem_x509_certificates(base64.b64decode(bundle)):
                    window.trusted_since.setdefault(ca.subject, now)
            time.sleep(1)
            turn, last_turn = time.time() - last_turn, time.time()
            if turn > FROZEN_SECONDS:
                window.frozen = max(window.frozen, turn)
    finally:
        stop.set()
        for thread in workers:
            thread.join()
    return window


def test_renewals_and_a_new_ca_under_load_refuse_no_pod(keeper: Keeper, kube: Kube) -> None:
    """Pods created for 110 s (server-side dry runs, each judged by both webhooks): every certificate
    renewal and the CA's replacement happen meanwhile, and not one creation fails."""
    window = observe(kube)
    if window.frozen:
        print(f"a turn of the sampling loop took {window.frozen:.0f} s (the machine stood still): a new window")
        window = observe(kube)
    assert not window.frozen, f"a turn of the sampling loop took {window.frozen:.0f} s in both windows"
    outcomes, served, first_ca = window.outcomes, window.served, window.first_ca
    failed = [o for o in outcomes if o[1] != 201]
    assert len(outcomes) > 300 and not failed, (len(outcomes), failed[:5], renewals(keeper))
    assert not window.expired, (window.expired, renewals(keeper))
    assert len(served) >= 5, f"the certificate was renewed {len(served) - 1} times"
    assert len(window.cas) >= 2 and first_ca.serial_number in window.cas, "a new CA joined the bundle"
    assert len(set(served.values())) >= 2, "a new CA signed what was served"
    # A CA that joined during the window is in the webhook configurations caSettle (30 s) before anything
    # it signed is served (the API server's caBundle cache has caught up by then). Without the wait it
    # would sign at the next renewal, at most 15 s and a look (5 s) after joining; sampled each second.
    signing_since, trusted_since = window.signing_since, window.trusted_since
    new_cas = [ca for ca in signing_since if ca != first_ca.subject and trusted_since[ca] > window.started + 1]
    assert new_cas and all(signing_since[ca] - trusted_since[ca] >= 25 for ca in new_cas), \
        {ca.rfc4514_string(): signing_since[ca] - trusted_since.get(ca, 0) for ca in new_cas}
    judged = {r["name"] for r in keeper.decisions() if r.get("endpoint") == "validate"}
    assert {name for name, _, _ in outcomes} <= judged, "every creation reached the second vgate"


def renewals(keeper: Keeper) -> list[str]:
    """The keeper's renewals and the master's worker replacements, from its log: what a failure needs."""
    said = ("renewed", "new serving certificate", "Spawning worker", "Stopped old", "did not stop", "expires")
    return [f"{line[11:23]} {line[23:].split(' ', 2)[-1][:90]}" for line in keeper.log().splitlines()
            if any(s in line for s in said)]


def cluster_api() -> Any:
    from webhook.cluster.api import ApiServer

    return ApiServer.from_kubeconfig(cluster.KUBECONFIG)


def test_a_keeper_that_may_not_update_its_secret_stops_with_one_line(keeper: Keeper, kube: Kube,
                                                                    tmp_path: Path) -> None:
    """Another Secret name, which the chart's Role does not grant: `vgate serve` exits at once (no
    retrying a refusal), one line naming the Secret and the API server's answer, no traceback."""
    command = [a for a in serve_command(keeper) if not a.startswith(("--tls-secret", "--bind", "--metrics-bind"))]
    command += [f"--tls-secret={charts.VGATE_NAMESPACE}/vgate-report-key", f"--bind={cluster.HOST}:{free_port()}",
                f"--metrics-bind={cluster.HOST}:{free_port()}"]
    done = subprocess.run(command, cwd=build.ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(build.ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(said) == 1 and "vgate-report-key" in said[0] and "403" in said[0], done.stderr[-2000:]


def test_a_foreign_ca_bundle_patched_in_is_replaced_within_a_look(keeper: Keeper, kube: Kube) -> None:
    """Someone with patch on the configurations (a Helm upgrade resetting the field, or an attacker
    pointing the API server at a CA they hold) writes another CA into a caBundle: the next look (every
    5 s) writes the Secret's CAs back; the foreign one is gone from every webhook."""
    foreign = (cluster.RUN / "pki" / "ca.crt").read_bytes()  # the cluster's own CA: not vgate's
    encoded = base64.b64encode(foreign).decode()
    patched = kube.run("patch", "validatingwebhookconfiguration", FULLNAME, "--type=json", "-p",
                       f'[{{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "{encoded}"}}]')
    assert patched.ok, patched.stderr
    started = time.monotonic()
    assert eventually(lambda: encoded not in bundles(kube) and len(set(bundles(kube))) == 1, timeout=15), \
        keeper.log()[-2000:]
    print(f"foreign caBundle replaced after {time.monotonic() - started:.1f} s")
    assert kube.create(pod("after-foreign"), namespace=NAMESPACE, dry_run=True).ok


def test_a_ca_planted_in_the_secret_without_its_key_is_never_trusted(keeper: Keeper, kube: Kube) -> None:
    """The Secret's ca.crt is read as a bundle: a certificate added there without its key (one an
    attacker signs with elsewhere) is dropped, never written into a caBundle and never served from.
    (Whoever may write the Secret's keys holds vgate's identity: the chart grants that to vgate's
    account alone, as the RBAC test above shows.)"""
    foreign = x509.load_pem_x509_certificate((cluster.RUN / "pki" / "ca.crt").read_bytes())
    secret = kube.get("secret", SECRET, charts.VGATE_NAMESPACE) or {}
    planted = base64.b64decode(secret["data"]["ca.crt"]) + foreign.public_bytes(Encoding.PEM)
    secret["data"]["ca.crt"] = base64.b64encode(planted).decode()
    for key in ("resourceVersion", "managedFields"):
        secret["metadata"].pop(key, None)
    replaced = kube.run("replace", "-f", "-", input_text=yaml.safe_dump(secret))
    assert replaced.ok, replaced.stderr
    deadline = time.monotonic() + 12  # two looks and more
    while time.monotonic() < deadline:
        trusted = {ca.subject for bundle in bundles(kube)
                   for ca in x509.load_pem_x509_certificates(base64.b64decode(bundle))}
        assert foreign.subject not in trusted
        assert served_certificate().issuer != foreign.subject
        time.sleep(1)
    assert kube.create(pod("after-planted"), namespace=NAMESPACE, dry_run=True).ok
