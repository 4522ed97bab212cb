"""Just enough of a Kubernetes client, over ``requests``: from a kubeconfig or in the pod.

Used by the report writer (server-side apply of policy reports) and by the cluster state (list
and watch). It trusts the cluster's CA only (no environment proxy or CA bundle).
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
import requests
import requests.auth
import yaml

MANAGED = "app.kubernetes.io/managed-by=vgate"
_SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiServer:
    """Just enough of a Kubernetes client: server-side apply, list and delete."""

    def __init__(self, url: str, session: requests.Session, files: tuple[str, ...] = ()) -> None:
        self.url = url.rstrip("/")
        self.session = session
        session.trust_env = False  # the cluster's CA, not REQUESTS_CA_BUNDLE; no proxy between pod and API server
        self._files = files  # a kubeconfig's inline CA, certificate and key, written out for requests

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(self, *_: object) -> None:
        """Close the session and remove the key material written out for it."""
        self.session.close()
        for name in self._files:
            Path(name).unlink(missing_ok=True)

    @classmethod
    def in_cluster(cls) -> ApiServer:
        session = requests.Session()
        session.verify = str(_SERVICE_ACCOUNT / "ca.crt")
        session.headers["Authorization"] = "Bearer " + (_SERVICE_ACCOUNT / "token").read_text().strip()
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        return cls(f"https://{host}:{port}", session)

    @classmethod
    def connect(cls, kubeconfig: str | Path | None) -> ApiServer:
        """From ``kubeconfig`` when one is given (a developer, a test, `vgate eval`), else as the pod's account."""
        return cls.from_kubeconfig(kubeconfig) if kubeconfig else cls.in_cluster()

    @classmethod
    def from_kubeconfig(cls, path: str | Path) -> ApiServer:
        """The current context of a kubeconfig: CA, and a client certificate or a token."""
        config = yaml.safe_load(Path(path).read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        session, written = requests.Session(), list[str]()
        session.verify = _file(cluster, "certificate-authority", written) or True
        if "token" in user:
            session.headers["Authorization"] = "Bearer " + user["token"]
        if user.get("exec"):  # a credential plugin (aws eks get-token, gke-gcloud-auth-plugin, kubelogin)
            plugin = ExecPlugin(user["exec"], Path(path).resolve().parent, cluster)
            credential = plugin.credential()
            if credential.get("clientCertificateData") and credential.get("clientKeyData"):
                user = {**user, "client-certificate-data": base64.b64encode(
                    credential["clientCertificateData"].encode()).decode(),
                        "client-key-data": base64.b64encode(credential["clientKeyData"].encode()).decode()}
            if credential.get("token"):
                session.auth = plugin
        certificate, key = _file(user, "client-certificate", written), _file(user, "client-key", written)
        if certificate and key:
            session.cert = (certificate, key)
        return cls(cluster["server"], session, tuple(written))

    def apply(self, path: str, document: dict[str, Any]) -> None:
        response = self.session.patch(f"{self.url}{path}", params={"fieldManager": "vgate", "force": "true"},
                                      data=yaml.safe_dump(document),
                                      headers={"Content-Type": "application/apply-patch+yaml"}, timeout=30)
        response.raise_for_status()

    def names(self, path: str) -> list[tuple[str, str]]:
        response = self.session.get(f"{self.url}{path}", params={"labelSelector": MANAGED}, timeout=30)
        response.raise_for_status()
        return [(item["metadata"].get("namespace", ""), item["metadata"]["name"]) for item in response.json()["items"]]

    def delete(self, path: str) -> None:
        response = self.session.delete(f"{self.url}{path}", timeout=30)
        if response.status_code != 404:
            response.raise_for_status()

    def get(self, path: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        response = self.session.get(f"{self.url}{path}", params=params, timeout=timeout)
        response.raise_for_status()
        document: dict[str, Any] = orjson.loads(response.content)  # a page of 500 pods: ~2x faster than json
        return document

    def replace(self, path: str, document: dict[str, Any]) -> dict[str, Any]:
        """PUT: an update that fails with 409 when ``document``'s resourceVersion is no longer the object's."""
        response = self.session.put(f"{self.url}{path}", data=orjson.dumps(document),
                                    headers={"Content-Type": "application/json"}, timeout=30)
        response.raise_for_status()
        replaced: dict[str, Any] = orjson.loads(response.content)
        return replaced

    def json_patch(self, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """An RFC 6902 patch (its ``test`` operations make it fail, 422, when the object moved under it)."""
        response = self.session.patch(f"{self.url}{path}", data=orjson.dumps(operations),
                                      headers={"Content-Type": "application/json-patch+json"}, timeout=30)
        response.raise_for_status()
        patched: dict[str, Any] = orjson.loads(response.content)
        return patched

    def watch(self, path: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """The watch events after ``resource_version``, until the server ends the watch."""
        params = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(timeout_seconds)}
        with self.session.get(f"{self.url}{path}", params=params, stream=True,
                              timeout=(10, timeout_seconds + 30)) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if line:
                    yield orjson.loads(line)


class ExecPlugin(requests.auth.AuthBase):
    """A kubeconfig user's ``exec`` credential plugin (client.authentication.k8s.io v1 or v1beta1), as
    kubectl runs it: the command (relative to the kubeconfig's directory when it names a path) with its
    args and env, told in KUBERNETES_EXEC_INFO that nobody can answer a prompt; its ExecCredential's
    token is sent as a bearer token, asked again once it expires (an EKS token lives 15 minutes, and
    the server's cluster state watches for days), its client certificate and key used as a pair."""

    def __init__(self, spec: dict[str, Any], base: Path, cluster: dict[str, Any]) -> None:
        self.spec, self.base, self.cluster = spec, base, cluster
        self._token: str | None = None
        self._expires: datetime | None = None

    def credential(self) -> dict[str, Any]:
        """Run the plugin; its ExecCredential's status. ValueError if it fails or answers nothing usable."""
        if self.spec.get("interactiveMode") == "Always":
            raise ValueError("the kubeconfig's exec plugin needs a terminal (interactiveMode Always): vgate has none")
        command = str(self.spec.get("command") or "")
        if "/" in command and not Path(command).is_absolute():
            command = str(self.base / command)
        api_version = self.spec.get("apiVersion") or "client.authentication.k8s.io/v1"
        info: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        if self.spec.get("provideClusterInfo"):
            info["spec"]["cluster"] = {"server": self.cluster.get("server"),
                                       "certificate-authority-data": self.cluster.get("certificate-authority-data")}
        env = {**os.environ, **{item["name"]: item["value"] for item in self.spec.get("env") or []},
               "KUBERNETES_EXEC_INFO": orjson.dumps(info).decode()}
        try:
            done = subprocess.run([command, *map(str, self.spec.get("args") or [])], env=env, capture_output=True,
                                  stdin=subprocess.DEVNULL, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ValueError(f"the kubeconfig's exec plugin {command} could not run: {error}") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["nothing"]
            raise ValueError(f"the kubeconfig's exec plugin {command} failed ({done.returncode}): {said[0][:300]}")
        try:
            status = orjson.loads(done.stdout)["status"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"the kubeconfig's exec plugin {command} printed no ExecCredential") from None
        if not isinstance(status, dict) or not (status.get("token") or status.get("clientKeyData")):
            raise ValueError(f"the kubeconfig's exec plugin {command} gave neither a token nor a client key")
        self._token = status.get("token")
        expires = status.get("expirationTimestamp")
        self._expires = datetime.fromisoformat(expires.replace("Z", "+00:00")) if expires else None
        return status

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if self._token is None or (self._expires is not None and datetime.now(timezone.utc) >= self._expires):
            self.credential()
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request


def _file(section: dict[str, Any], key: str, written: list[str]) -> str | None:
    """A kubeconfig's file field, or its inline ``-data`` twin written to a private temporary file
    (recorded in ``written``, removed when the ApiServer is closed)."""
    if section.get(key):
        return str(section[key])
    data = section.get(f"{key}-data")
    if not data:
        return None
    handle = tempfile.NamedTemporaryFile("wb", prefix="vgate-kube-", delete=False)  # noqa: SIM115 - kept for requests
    with handle:
        handle.write(base64.b64decode(data))
    written.append(handle.name)
    return handle.name
