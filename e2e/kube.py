"""What the end-to-end tests do to the cluster: kubectl as a user runs it, and vgate's decision log.

Objects are created the way users and their CI do, with the cluster's own kubectl; assertions read
what the API server stored, and what vgate recorded, never vgate's answers directly.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import build, cluster, records
from e2e.waiting import eventually


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Kube:
    """kubectl against the e2e cluster, as the identity in ``kubeconfig`` (cluster admin by default)."""

    def __init__(self, kubeconfig: Path = cluster.KUBECONFIG) -> None:
        self.kubeconfig = kubeconfig

    def run(self, *args: str, input_text: str | None = None, timeout: float = 60) -> Result:
        done = subprocess.run([str(build.BIN / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                              input=input_text, capture_output=True, text=True, timeout=timeout)
        return Result(done.returncode, done.stdout, done.stderr)

    def create(self, *objects: dict[str, Any], namespace: str | None = None, dry_run: bool = False) -> Result:
        args = ["create", "-f", "-", *(["-n", namespace] if namespace else []),
                *(["--dry-run=server"] if dry_run else [])]
        return self.run(*args, input_text=yaml.safe_dump_all(objects))

    def apply(self, *objects: dict[str, Any]) -> Result:
        return self.run("apply", "-f", "-", input_text=yaml.safe_dump_all(objects))

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        result = self.run("get", resource, name, "-o", "json", *(["-n", namespace] if namespace else []))
        return json.loads(result.stdout) if result.ok else None

    def list(self, resource: str, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        result = self.run("get", resource, "-n", namespace, "-o", "json", *(["-l", selector] if selector else []))
        assert result.ok, result.stderr
        items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
        return items

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        """A fresh namespace (deleted first if a previous run left it), returned by name."""
        self.run("delete", "namespace", name, "--ignore-not-found", "--wait=true", timeout=120)
        result = self.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": name, "labels": labels or {}}})
        assert result.ok, result.stderr
        # The service-account admission plugin refuses pods until the namespace's default account exists.
        assert eventually(lambda: self.get("serviceaccount", "default", name)), f"no default account in {name}"
        return name


def decisions() -> list[dict[str, Any]]:
    """The e2e vgate's decision records, in the order decided."""
    return records.decisions(cluster.VGATE_DIR / "audit")


def decisions_for(namespace: str, name: str | None = None, endpoint: str | None = None) -> list[dict[str, Any]]:
    return [r for r in decisions() if r.get("namespace") == namespace and (name is None or r.get("name") == name)
            and (endpoint is None or r.get("endpoint") == endpoint)]
