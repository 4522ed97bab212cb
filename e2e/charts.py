"""What Volcano's and vgate's Helm charts install, rendered by Helm's own engine (helm-python-sdk).

The control plane installs these objects instead of hand-written ones, so a defect in either
chart (a webhook rule, an RBAC verb, a selector) shows in the real API server. What the charts
would run as Deployments runs here as processes, with the container arguments the charts give
(less the in-cluster paths).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from e2e import build

VOLCANO_NAMESPACE = "volcano-system"
VGATE_NAMESPACE = "vgate-system"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
# What the charts would run or route in a cluster; here processes on loopback do that instead.
NOT_INSTALLED = ("Deployment", "Service", "Job", "CronJob", "PersistentVolumeClaim", "PodDisruptionBudget",
                 "NetworkPolicy", *WEBHOOK_KINDS)


def render(chart: Path, name: str, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    manifests = helm.Chart.load(chart).render(values, name=name, namespace=namespace, is_install=True)
    return [document for path, text in sorted(manifests.items()) if not path.endswith("NOTES.txt")
            for document in yaml.safe_load_all(text) if document]


def module_dir(module: str, wrapper: Path = build.MODULE) -> Path:
    """Where a wrapper module's copy of ``module`` is in the module cache (the control plane's
    wrapper, by default)."""
    out = subprocess.run(["go", "list", "-m", "-json", module], cwd=wrapper, check=True,
                         capture_output=True, text=True).stdout
    return Path(json.loads(out)["Dir"])


def admin_network_policy_crds() -> list[dict[str, Any]]:
    """sig-network's AdminNetworkPolicy and BaselineAdminNetworkPolicy CRDs, as their module ships
    them (config/crd/experimental: with the networks and nodes peers), downloaded by the Go command
    and checked against e2e/build/netpol/go.sum."""
    out = subprocess.run(["go", "mod", "download", "-json", "sigs.k8s.io/network-policy-api"],
                         cwd=build.MODULE / "netpol", check=True, capture_output=True, text=True).stdout
    folder = Path(json.loads(out)["Dir"]) / "config" / "crd" / "experimental"
    return [document for path in sorted(folder.glob("policy.networking.k8s.io_*.yaml"))
            for document in yaml.safe_load_all(path.read_text()) if document]


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _container_args(objects: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {container["name"]: list(container.get("args", []))
            for o in objects if o["kind"] == "Deployment"
            for container in o["spec"]["template"]["spec"]["containers"]}


def args_without(args: list[str], *prefixes: str) -> list[str]:
    """The chart's arguments less those that name in-cluster paths or addresses (set anew here)."""
    return [a for a in args if not a.startswith(prefixes)]


@dataclass
class VolcanoObjects:
    cluster_setup: list[dict[str, Any]]
    webhook_configurations: list[dict[str, Any]]
    files: dict[str, str]
    args: dict[str, list[str]]


def volcano_objects() -> VolcanoObjects:
    chart = module_dir("volcano.sh/volcano") / "installer" / "helm" / "chart" / "volcano"
    objects = render(chart, "volcano", VOLCANO_NAMESPACE, {})
    # The admission-init Job made the webhook certificate in a cluster; here the harness does.
    setup = [o for o in objects if o["kind"] not in NOT_INSTALLED and "admission-init" not in o["metadata"]["name"]]
    files = {key: text for o in objects if o["kind"] == "ConfigMap" for key, text in o.get("data", {}).items()
             if key.endswith(".conf")}
    return VolcanoObjects([_namespace(VOLCANO_NAMESPACE), *setup],
                          [o for o in objects if o["kind"] in WEBHOOK_KINDS], files, _container_args(objects))


@dataclass
class VgateObjects:
    cluster_setup: list[dict[str, Any]]
    webhook_configurations: list[dict[str, Any]]
    config: dict[str, Any]
    policies: dict[str, str]


def vgate_objects(values: dict[str, Any]) -> VgateObjects:
    objects = render(build.ROOT / "charts" / "vgate", "vgate", VGATE_NAMESPACE, values)
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    config = yaml.safe_load(by_name[("ConfigMap", "vgate-config")]["data"]["vgate.yaml"])
    return VgateObjects(
        [_namespace(VGATE_NAMESPACE), *(o for o in objects if o["kind"] not in NOT_INSTALLED)],
        [o for o in objects if o["kind"] in WEBHOOK_KINDS], config, policy_files(objects))


def narrowed_webhooks(objects: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """A second release's two webhook configurations, their pod webhooks only and for namespaces
    labelled ``label=true`` only, so that the rest of the suite (and kwok's Nodes) never call it."""
    narrowed = []
    for configuration in (copy.deepcopy(o) for o in objects if o["kind"] in WEBHOOK_KINDS):
        configuration["webhooks"] = [w for w in configuration["webhooks"]
                                     if w["name"] in ("mutate.vgate.io", "validate.vgate.io")]
        for webhook in configuration["webhooks"]:
            webhook["namespaceSelector"] = {"matchLabels": {label: "true"}}
            webhook.pop("objectSelector", None)
        narrowed.append(configuration)
    return narrowed


def policy_files(objects: list[dict[str, Any]], fullname: str = "vgate") -> dict[str, str]:
    """The policies directory as the kubelet projects the chart's ConfigMap (its volume's key -> path items)."""
    name = f"{fullname}-policies"
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name)
    deployment = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == fullname)
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"]
                  if v.get("configMap", {}).get("name") == name)
    return {item["path"]: config_map["data"][item["key"]] for item in volume["configMap"]["items"]}


def project(files: dict[str, str], target: Path) -> None:
    """Writes ``files`` into ``target`` as the kubelet projects a ConfigMap volume, or updates it.

    The kubelet's AtomicWriter: the files go into a new ``..<timestamp>`` folder, then the
    ``..data`` symlink is swapped to it in one rename, and each top-level name is a symlink through
    ``..data``; the old folder is removed after. A reader sees the whole old set or the whole new one.
    """
    target.mkdir(parents=True, exist_ok=True)
    version = target / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
    for path, text in files.items():
        (version / path).parent.mkdir(parents=True, exist_ok=True)
        (version / path).write_text(text)
    old = os.readlink(target / "..data") if (target / "..data").is_symlink() else None
    staged = target / "..data_tmp"
    staged.unlink(missing_ok=True)
    staged.symlink_to(version.name)
    os.replace(staged, target / "..data")
    top = {path.split("/", 1)[0] for path in files}
    for name in top:
        if not (target / name).is_symlink():
            (target / name).symlink_to(f"..data/{name}")
    for entry in target.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in top:
            entry.unlink()
    if old:
        shutil.rmtree(target / old, ignore_errors=True)


def local_config(config: dict[str, Any], workdir: Path) -> str:
    """The chart's vgate.yaml with its in-pod paths moved under ``workdir``."""
    config = {**config, "audit": {**config.get("audit", {}), "dir": str(workdir / "audit")},
              "reports": {**config.get("reports", {}), "dir": str(workdir / "reports"),
                          "key": str(workdir / "keys" / "report-ed25519.key"),
                          # beside workdir, as the chart's anchor is a volume of its own (anchor_place)
                          "anchorFile": str(workdir.with_name(workdir.name + "-anchor") / "reports-anchor.jsonl")},
              "exceptions": {**config.get("exceptions", {}), "dir": str(workdir / "exceptions")}}
    return yaml.safe_dump(config, sort_keys=False)
