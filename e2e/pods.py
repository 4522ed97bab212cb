"""The chart's gateway pods as Helm renders them, run by podman beside the e2e control plane.

`podman kube play` runs each replica of the chart's Deployment from its pod template as rendered
(image, args, env, securityContext, ports), giving it by hand what the kubelet would: ConfigMap
volumes are host folders written the kubelet's way (``charts.project``: files under a ``..data``
link swapped in one rename), the ReadWriteMany claim one host folder shared by every replica and
owned by the pod's fsGroup, the service account's token where the kubelet mounts it, and
KUBERNETES_SERVICE_HOST/PORT. There is no kube-proxy here, so HAProxy (Debian's) stands in for the
Service: one address for the replicas, which it takes out of rotation when /readyz fails, as the
readiness probe takes a pod out of the Endpoints. The API server listens on loopback; HAProxy also
relays the pods' own API traffic from the podman bridge to it.

State lives under .e2e/run/pods/<release>/ (made anew by each ``PodRelease.start``).
"""

from __future__ import annotations

import copy
import http.client
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from e2e import build, charts, cluster
from e2e.waiting import eventually

IMAGE = "localhost/vgate:e2e"
API_RELAY_PORT = 16463        # HAProxy: the bridge -> the API server on loopback
UID = 10001
AUDIT_CLAIM_BYTES = 64 * 1024 * 1024
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")  # Debian's libfaketime, as the host has it


def build_image() -> str:
    """The image from this checkout's Dockerfile (e2e/image.sh; its base cached in .e2e/image)."""
    built = subprocess.run(["bash", str(build.ROOT / "e2e" / "image.sh"), IMAGE], capture_output=True, text=True,
                           timeout=1200, cwd=build.ROOT)
    if built.returncode:
        raise RuntimeError(f"e2e/image.sh failed:\n{built.stdout}{built.stderr}")
    return built.stdout.strip()  # "<image> <size> MB"


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode:
        raise RuntimeError(f"podman {' '.join(args[:2])}: {done.stderr.strip()[-2000:]}")
    return done


class PodRelease:
    """One release of the chart: its Deployment's replicas in podman, HAProxy in front of them.

    ``objects``: the chart rendered for this release (its ``webhooks.url`` the balancer's address).
    Replica ``i`` publishes HTTPS on ``https_port + i`` and its probe port on ``probe_port + i``.
    ``folders``: where a volume's files are projected, by volume name, when not under the release's
    own state (the suite's release shares its policies folder with the tests that edit it);
    ``secrets``: the files of each Secret a volume names, as the kubelet would mount them.
    """

    def __init__(self, objects: list[dict[str, Any]], fullname: str, balancer_port: int, https_port: int,
                 probe_port: int, replicas: int = 2, *, api_relay_port: int = API_RELAY_PORT,
                 folders: dict[str, Path] | None = None, secrets: dict[str, dict[str, bytes]] | None = None,
                 audit_claim_bytes: int = AUDIT_CLAIM_BYTES) -> None:
        self.objects, self.fullname = objects, fullname
        self.balancer_port, self.https_port, self.probe_port = balancer_port, https_port, probe_port
        self.replicas, self.api_relay_port, self.audit_claim_bytes = replicas, api_relay_port, audit_claim_bytes
        self.folders, self.secrets = folders or {}, secrets or {}
        self.root = cluster.RUN / "pods" / fullname
        self.haproxy: subprocess.Popen[bytes] | None = None

    # -- what the kubelet would give the pods --------------------------------------------------
    def object(self, kind: str, name: str) -> dict[str, Any]:
        return next(o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name)

    @property
    def deployment(self) -> dict[str, Any]:
        return self.object("Deployment", self.fullname)

    @property
    def audit_dir(self) -> Path:
        return self.root / "claims" / "audit" / "audit"  # the claim's folder, then the mount's subPath

    def folder(self, volume: str) -> Path:
        return self.folders.get(volume) or self.root / "volumes" / volume

    def project_config_maps(self) -> None:
        """Each ConfigMap volume of the pod template, written (or rewritten) as the kubelet does."""
        for volume in self.deployment["spec"]["template"]["spec"]["volumes"]:
            if "configMap" not in volume:
                continue
            data = self.object("ConfigMap", volume["configMap"]["name"]).get("data") or {}
            items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
            charts.project({item["path"]: data[item["key"]] for item in items}, self.folder(volume["name"]))

    def project_secrets(self) -> None:
        """Each Secret volume whose Secret this release was given, written as the kubelet does: the
        files under ``..data``, group-owned by the pods' fsGroup, with the volume's defaultMode."""
        for volume in self.deployment["spec"]["template"]["spec"]["volumes"]:
            files = self.secrets.get((volume.get("secret") or {}).get("secretName", ""))
            if files is None:
                continue
            folder = self.folder(volume["name"])
            charts.project({name: data.decode() for name, data in files.items()}, folder)
            data = (folder / "..data").resolve()
            for name in files:
                os.chown(data / name, 0, UID)
                os.chmod(data / name, volume["secret"].get("defaultMode", 0o644))

    def replace_secret(self, name: str, files: dict[str, bytes]) -> None:
        """A Secret updated in the API (a renewed certificate), as the pods then see it."""
        self.secrets[name] = files
        self.project_secrets()

    def edit_config_map(self, name: str, data: dict[str, str]) -> None:
        """`kubectl edit configmap`, as the pods then see it: the new data projected with a new ..data."""
        self.object("ConfigMap", name)["data"] = data
        self.project_config_maps()

    def service_account_folder(self, account: str) -> Path:
        """What the kubelet mounts for ``account``: a token (kubectl create token), the CA, the namespace."""
        namespace = self.deployment["metadata"]["namespace"]
        token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=24h").stdout.strip()
        folder = self.root / "serviceaccounts" / account
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "token").write_text(token)
        shutil.copy(cluster.RUN / "pki" / "ca.crt", folder / "ca.crt")
        (folder / "namespace").write_text(namespace)
        return folder

    def claim(self, volume: dict[str, Any]) -> Path:
        return self.root / "claims" / volume["persistentVolumeClaim"]["claimName"].removeprefix(f"{self.fullname}-")

    def pod(self, index: int, image: str) -> dict[str, Any]:
        """Replica ``index`` as `podman kube play` takes it, its ports published on the host."""
        published = {"https": self.https_port + index, "metrics": self.probe_port + index}
        return self.as_podman_pod(self.deployment["spec"]["template"], f"{self.fullname}-{index}", image, published)

    def as_podman_pod(self, template: dict[str, Any], name: str, image: str, published: dict[str, int],
                      env: dict[str, str] | None = None, mounts: dict[str, Path] | None = None) -> dict[str, Any]:
        """A rendered pod template as `podman kube play` takes it: its volumes host folders (a claim
        mounted with subPath: that folder of the claim), its account's token where the kubelet puts it,
        the API server at the relay, ``env`` added and ``mounts`` (a path in the container: a host
        folder, read-only) added; the rest as rendered."""
        template = copy.deepcopy(template)
        spec = template["spec"]
        container = spec["containers"][0]
        container["image"] = image
        added = {"VGATE_REPLICA": name,  # the chart's fieldRef: the pod's name
                 "KUBERNETES_SERVICE_HOST": cluster.PODMAN_GATEWAY, "KUBERNETES_SERVICE_PORT": str(self.api_relay_port),
                 **(env or {})}
        container["env"] = [e for e in container.get("env", []) if e["name"] not in added] + [
            {"name": key, "value": value} for key, value in added.items()]
        for port in container.get("ports", []):
            port["hostPort"], port["hostIP"] = published[port["name"]], cluster.HOST
        folders: dict[str, Path] = {}
        for volume in spec["volumes"]:
            if "persistentVolumeClaim" in volume:
                folders[volume["name"]] = self.claim(volume)
            elif "emptyDir" not in volume:
                folders[volume["name"]] = self.folder(volume["name"])
        volumes = [v for v in spec["volumes"] if "emptyDir" in v]
        for number, mount in enumerate(container["volumeMounts"]):
            if mount["name"] in folders:  # podman takes no subPath on a host folder: that folder of it
                path = folders[mount["name"]] / mount.pop("subPath", "")
                mount["name"] = f"mount-{number}"
                volumes.append(_host_folder(mount["name"], path))
        account = self.service_account_folder(spec["serviceAccountName"])
        for number, (target, path) in enumerate({SERVICE_ACCOUNT: account, **(mounts or {})}.items()):
            container["volumeMounts"].append({"name": f"added-{number}", "mountPath": target, "readOnly": True})
            volumes.append(_host_folder(f"added-{number}", path))
        spec["volumes"] = volumes
        for key in ("topologySpreadConstraints", "priorityClassName", "serviceAccountName",
                    "automountServiceAccountToken"):
            spec.pop(key, None)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": template["metadata"].get(
            "labels", {})}, "spec": spec}

    # -- running them ------------------------------------------------------------------------
    def start(self, image: str = IMAGE) -> None:
        """Folders, token, HAProxy, then every replica; returns when each one's /readyz says ready."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.project_config_maps()
        self.project_secrets()
        # the shared claim is a volume of its own size (a tmpfs), so that a test can fill it
        (self.root / "claims" / "audit").mkdir(parents=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.audit_claim_bytes}", "tmpfs",
                        str(self.root / "claims" / "audit")], check=True)
        for claim in ("audit/audit", "audit/reports", "report-anchor"):
            (self.root / "claims" / claim).mkdir(parents=True, exist_ok=True)
        self.own_claims()
        self._start_haproxy()
        self.start_replicas(image)

    def stop_replicas(self) -> None:
        """Every replica stopped (SIGTERM, then SIGKILL after 10 s), HAProxy left up: the Service
        with no ready endpoint, as after `kubectl scale --replicas=0`."""
        for index in range(self.replicas):
            podman("pod", "stop", "-t", "10", f"{self.fullname}-{index}", check=False)

    def start_replicas(self, image: str = IMAGE) -> None:
        """Every replica made anew (new pods, as the Deployment makes them), returning when ready."""
        for index in range(self.replicas):
            self.play(index, image)
        for index in range(self.replicas):
            self.wait_ready(index)

    def running(self) -> bool:
        """Whether any replica's container runs."""
        return any(podman("container", "inspect", "-f", "{{.State.Running}}", self.container(index),
                          check=False).stdout.strip() == "true" for index in range(self.replicas))

    def wait_ready(self, index: int) -> None:
        if not eventually(lambda: self.ready(index), timeout=120):
            raise RuntimeError(f"replica {index} never ready:\n{self.logs(index)[-3000:]}")

    def own_claims(self, uid: int = UID) -> None:
        """What fsGroup does to a claim: the pods' group owns it, writable by the group."""
        for path in (self.root / "claims").rglob("*"):
            os.chown(path, uid, uid)
        os.chown(self.root / "claims", uid, uid)

    def play(self, index: int, image: str = IMAGE) -> None:
        self._play(self.pod(index, image))

    def _play(self, pod: dict[str, Any]) -> None:
        manifest = self.root / f"{pod['metadata']['name']}.yaml"
        manifest.write_text(yaml.safe_dump(pod, sort_keys=False))
        podman("kube", "play", "--replace", "--network=podman", str(manifest), timeout=180)

    def run_report_writer(self, image: str = IMAGE, later: str = "") -> tuple[int, str]:
        """The CronJob's job pod, run once to its end: its exit code and its log. ``later`` (e.g.
        "+2h"): the pod's clock that much ahead (libfaketime, preloaded from the host), so that
        the hour of the decisions has closed."""
        cron = next(o for o in self.objects if o["kind"] == "CronJob")
        template = copy.deepcopy(cron["spec"]["jobTemplate"]["spec"]["template"])
        template["spec"]["restartPolicy"] = "Never"
        env, mounts = {}, {}
        if later:
            env = {"LD_PRELOAD": f"/faketime/{FAKETIME.name}", "FAKETIME": later, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
            mounts = {"/faketime": FAKETIME.parent}
        name = f"{self.fullname}-report-writer"
        self._play(self.as_podman_pod(template, name, image, {}, env, mounts))
        container = f"{name}-report-writer"
        code = podman("wait", container, timeout=300).stdout.strip()
        logs = podman("logs", container, check=False)
        podman("pod", "rm", "-f", name, check=False)
        return int(code or -1), logs.stdout + logs.stderr

    def container(self, index: int) -> str:
        return f"{self.fullname}-{index}-vgate"

    def ready(self, index: int) -> bool:
        return self.readyz(index)[0] == 200

    def readyz(self, index: int) -> tuple[int, str]:
        """The readiness probe's answer (status and body), or (0, "") while nothing answers."""
        try:
            with urllib.request.urlopen(f"http://{cluster.HOST}:{self.probe_port + index}/readyz",
                                        timeout=3) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            try:
                return error.code, error.read().decode()
            except (OSError, http.client.HTTPException):  # a master that ended under the read: its status stands
                return error.code, ""
        except OSError:
            return 0, ""

    def logs(self, index: int) -> str:
        done = podman("logs", self.container(index), check=False)
        return done.stdout + done.stderr

    def kill(self, index: int) -> None:
        podman("kill", self.container(index), check=False)

    def stop_one(self, index: int) -> None:
        """The kubelet's stop of a deleted pod: SIGTERM, SIGKILL after the grace period (30 s by default)."""
        podman("stop", "-t", "30", self.container(index), check=False, timeout=60)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Every replica frozen (the cgroup freezer) while the block runs, thawed after: nothing
        more enters the hour's segments, as once the hour has closed. Heartbeats (one a minute per
        worker) would otherwise land in the hour a test's report writer has just signed."""
        try:  # a replica that fails to pause thaws the ones paused before it
            for index in range(self.replicas):
                podman("pod", "pause", f"{self.fullname}-{index}")
            yield
        finally:
            for index in range(self.replicas):
                podman("pod", "unpause", f"{self.fullname}-{index}", check=False)

    def exec(self, index: int, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.container(index), *command, check=False)

    def _start_haproxy(self) -> None:
        servers = "\n".join(
            f"    server r{i} {cluster.HOST}:{self.https_port + i} check port {self.probe_port + i} "
            "inter 500 fall 2 rise 1" for i in range(self.replicas))
        config = self.root / "haproxy.cfg"
        config.write_text(f"""global
    maxconn 4096
defaults
    mode tcp
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 2
    option redispatch
frontend webhook
    bind {cluster.HOST}:{self.balancer_port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
{servers}
frontend apiserver
    bind 0.0.0.0:{self.api_relay_port}
    default_backend apiserver
backend apiserver
    server api {cluster.HOST}:{cluster.APISERVER_PORT}
""")
        log = (self.root / "haproxy.log").open("ab")
        self.haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        (self.root / "haproxy.pid").write_text(str(self.haproxy.pid))
        if not eventually(lambda: cluster.listening(self.balancer_port), timeout=10):
            raise RuntimeError(f"haproxy did not start:\n{(self.root / 'haproxy.log').read_text()}")

    def fill_audit_claim(self) -> Path:
        """The shared claim full (as a volume that ran out of space): a file of all that is left."""
        filler = self.root / "claims" / "audit" / "filler"
        # unbuffered: a buffered file keeps the part of its last write that did not fit and raises
        # ENOSPC again on close, which left the claim full for every later test
        with filler.open("wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(b"\0" * 1048576)
            except OSError:
                pass
        return filler

    def stop(self) -> None:
        remove(self.root)


def remove(root: Path) -> None:
    """Everything a release started under ``root``: its pods (each played from a manifest there),
    its claim's tmpfs, its HAProxy. Also what `e2e/cluster down` calls, from any process."""
    for manifest in root.glob("*.yaml"):
        podman("pod", "rm", "-f", manifest.stem, check=False)
    subprocess.run(["umount", str(root / "claims" / "audit")], capture_output=True, check=False)
    pid_file = root / "haproxy.pid"
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
        pid_file.unlink()
        time.sleep(0.2)


def remove_all() -> None:
    """Every release under .e2e/run/pods (`e2e/cluster down`)."""
    folder = cluster.RUN / "pods"
    for root in sorted(folder.iterdir()) if folder.is_dir() else []:
        remove(root)


def _host_folder(name: str, path: Path) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": str(path), "type": "Directory"}}
