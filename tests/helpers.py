"""Test helpers: the real corpus, AdmissionReviews as the API server sends them, a real `vgate serve`.

A plain module: tests import what they use from here; ``conftest.py`` holds only fixtures.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import requests
import yaml

from e2e import records
from e2e.waiting import eventually  # noqa: F401 (tests import it from here)
from webhook.files.config_file import DEFAULT_CONFIG_PATH
from webhook.offline.admit import review_for

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
CORPUS = ROOT.parent / "shared" / "corpus"
VGATE = [sys.executable, "-m", "webhook"]
K8S_VERSION = "1.35"  # the Kubernetes OpenAPI schema objects are validated against


def corpus_file(*parts: str) -> Path:
    path = CORPUS.joinpath(*parts)
    assert path.is_file(), f"missing test corpus file {path}: ../shared must sit beside the checkout"
    return path


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    """The objects of a (multi-document) YAML file; empty documents dropped."""
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def corpus_documents(*parts: str) -> list[dict[str, Any]]:
    return yaml_documents(corpus_file(*parts))


def review(obj: dict[str, Any], **options: Any) -> dict[str, Any]:
    """An AdmissionReview for ``obj`` (CREATE unless ``operation`` says otherwise)."""
    options.setdefault("dry_run", False)
    return review_for(obj, **options)


def pod(name: str = "p", namespace: str = "web", *, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    spec.setdefault("containers", [{"name": "main", "image": "registry.example.com/app:1"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


# A pod spec the restricted Pod Security Standard admits without a warning.
RESTRICTED_SPEC: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "main", "image": "registry.example.com/app:1",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
}


def shipped_config(**sections: dict[str, Any]) -> str:
    """The shipped config as YAML, each named section's keys changed (the rest of the section kept)."""
    document = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    for name, changes in sections.items():
        document[name] = {**document.get(name, {}), **changes}
    return yaml.safe_dump(document)


def anchor_beside(root: Path) -> Path:
    """Where a test's report writer keeps its anchor when ``root`` holds its audit/ and reports/: beside
    ``root``, never in it (the writer refuses an anchor inside the directory that holds the evidence)."""
    return root.with_name(root.name + "-writer") / "anchor.jsonl"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A `vgate serve` process (granian, TLS) on a free loopback port."""

    def __init__(self, workdir: Path, config_text: str | None = None, policies: Path = POLICIES,
                 workers: int = 2, make_certs: bool = True, extra_args: tuple[str, ...] = (),
                 audit_dir: Path | None = None, hourly_reports: bool = False,
                 client_cert: tuple[str, str] | None = None, ready_path: str = "/readyz") -> None:
        self.workdir = workdir
        self.ready_path = ready_path  # /healthz for a server that is meant not to be ready
        self.port = free_port()
        self.url = f"https://localhost:{self.port}"
        self.ca = workdir / "certs" / "ca.crt"
        self.audit_dir = audit_dir or workdir / "audit"
        bind = [a.split("=", 1)[1] if "=" in a else extra_args[i + 1] for i, a in enumerate(extra_args)
                if a.split("=", 1)[0] == "--metrics-bind"]
        self.probes_url = f"http://{bind[0]}" if bind else None
        config_path = self.config_path = workdir / "vgate.yaml"
        workdir.mkdir(parents=True, exist_ok=True)
        text = config_text if config_text is not None else DEFAULT_CONFIG_PATH.read_text()
        document = yaml.safe_load(text) or {}
        document.setdefault("audit", {})["dir"] = str(self.audit_dir)
        config_path.write_text(yaml.safe_dump(document))
        if make_certs:
            subprocess.run([*VGATE, "certs", "--out", str(workdir / "certs")], check=True, capture_output=True)
        self.log = open(workdir / "server.log", "wb")  # noqa: SIM115 - the server's output, closed by stop()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "VGATE_REPLICA": "test-replica",
               "HOME": str(workdir.with_name(workdir.name + "-home"))}  # the default anchor: this server's own
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        env.pop("VGATE_RUNTIME_DIR", None)
        self.process = subprocess.Popen(
            [
                *VGATE,
                "serve",
                "--config",
                str(config_path),
                "--policies",
                str(policies),
                "--certs",
                str(workdir / "certs"),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(workers),
                *extra_args,
                "--hourly-reports" if hourly_reports else "--no-hourly-reports",
            ],
            cwd=workdir,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.session = requests.Session()
        self.session.verify = str(self.ca)
        self.session.trust_env = False  # else REQUESTS_CA_BUNDLE from the environment overrides verify
        self.session.cert = client_cert  # what the API server presents when server.clientCA is set
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vgate serve exited {self.process.returncode}:\n{self.output()}")
            try:
                if self._ready():
                    return
            except OSError:  # not listening yet, or (self-generated certs) no CA file yet
                time.sleep(0.2)
        raise RuntimeError(f"vgate serve not ready in 30 s:\n{self.output()}")

    def _ready(self) -> bool:
        """/readyz on the probe port when --metrics-bind gives one (the admission port then has none)."""
        if self.probes_url:
            return (requests.get(self.probes_url + "/readyz", timeout=2).status_code == 200
                    and self.session.get(self.url + "/healthz", timeout=2).status_code == 200)
        return self.session.get(self.url + self.ready_path, timeout=2).status_code == 200

    def output(self) -> str:
        self.log.flush()
        return (self.workdir / "server.log").read_text(errors="replace")

    def post(self, endpoint: str, body: Any, **kwargs: Any) -> requests.Response:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.session.post(
            self.url + endpoint, data=data, timeout=10, headers={"Content-Type": "application/json"}, **kwargs
        )

    def decisions(self) -> list[dict[str, Any]]:
        """Every record, in the order they were decided (each worker writes a segment of its own)."""
        return records.decisions(self.audit_dir)

    def decisions_tolerant(self) -> list[dict[str, Any]]:
        """Every whole record, skipping a torn last line a crash may leave."""
        whole = []
        for segment in sorted(self.audit_dir.glob("*.jsonl")):
            for line in segment.read_text().splitlines():
                try:
                    whole.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return whole

    def stop(self) -> None:
        self.session.close()  # idle keep-alive connections would hold gunicorn's graceful stop
        workers = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True).stdout.split()
        self.process.send_signal(signal.SIGINT)  # quick shutdown; graceful TERM lingers ~3 s per server
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        # gunicorn's quick shutdown does not wait for its workers, and a gthread worker hit by the
        # signal inside ThreadPoolExecutor.submit deadlocks on the executor's lock: reap them all.
        for pid in workers:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()


def copy_policies(target: Path) -> Path:
    shutil.copytree(POLICIES, target)
    return target


def is_strictly_valid(obj: dict[str, Any]) -> bool:
    """Whether the Kubernetes OpenAPI schema accepts ``obj``, unknown fields refused."""
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError:
        return False
    return True


@functools.cache
def crd_validator(filename: str) -> jsonschema.Draft4Validator:
    """Volcano's CRD schema (OpenAPI v3, a JSON Schema draft-4 dialect), parsed once."""
    crd = yaml.safe_load(corpus_file("volcano-crds", filename).read_text())
    return jsonschema.Draft4Validator(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def fill(mount: Path, leave: int = 0) -> Path:
    """Fill the disk at ``mount`` but for about ``leave`` bytes."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 1024):
            pass
    except OSError:
        pass  # full
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@functools.cache
def test_ca_bundle() -> str:
    """base64 of a real CA certificate's PEM, for charts rendered without cert-manager."""
    import datetime

    from cryptography.hazmat.primitives.serialization import Encoding

    from webhook.server.certs import new_ca

    cert, _ = new_ca("vgate-test-ca", datetime.datetime.now(datetime.timezone.utc), 365)
    return base64.b64encode(cert.public_bytes(Encoding.PEM)).decode()


def trusted(values: dict[str, Any]) -> dict[str, Any]:
    """Chart values with a CA the API server trusts, unless they bring cert-manager or their own."""
    if values.get("certManager", {}).get("enabled") or values.get("tls", {}).get("caBundle"):
        return values
    return {**values, "tls": {**values.get("tls", {}), "caBundle": test_ca_bundle()}}


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (a server's workers, their evaluator children), from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = {pid for pid, ppid in parents.items() if ppid == parent} - found
        found |= children
        frontier.extend(children)
    return found


def evaluator_children(root: int) -> list[int]:
    """The pids of the evaluator children under process ``root`` (its workers' children)."""
    def evaluator(pid: int) -> bool:
        try:
            return b"webhook.policy.evaluator" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    return sorted(pid for pid in descendants(root) if evaluator(pid))
