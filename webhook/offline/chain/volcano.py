"""What Volcano's own mutating webhooks do to Jobs, PodGroups and Pods (``vgate eval --with-volcano``).

From volcano-sh/volcano ``pkg/webhooks/admission/*/mutate`` (CREATE only, each):

- Jobs (``mutate_job.go``): ``queue: default`` and ``schedulerName: volcano`` when empty,
  ``maxRetry: 3`` when 0, ``minAvailable`` when 0 (the sum of the tasks' minAvailable, else
  replicas); each task gets a name (``default<i>``), ``minAvailable`` (its replicas),
  ``maxRetry: 3``, and ``dnsPolicy: ClusterFirstWithHostNet`` with hostNetwork and no dnsPolicy;
  when it changed any task it replaces ``/spec/tasks`` with all of them as its Go types serialize
  them (canonical quantities, ``resources: {}``, no empty env values: measured against Volcano
  v1.14.1 in tests/e2e); the tensorflow, mpi, pytorch and ray plugins get ``svc``, mpi also ``ssh``.
- PodGroups (``mutate_podgroup.go``): a queue of ``default`` becomes the namespace's
  ``scheduling.volcano.sh/queue-name`` annotation, when the namespace has one.
- Pods (``mutate_pod.go``, resource groups from the webhook's admission config): a pod in a
  group's namespaces, or with one of its annotations (default key ``volcano.sh/resource-group``),
  gets the group's nodeSelector labels, affinity (when it has none), tolerations and
  schedulerName. The first matching group applies. Scheduling gates (opt-in) are not modelled.

Volcano's validating webhooks (queue exists and is open, job shape) are not modelled.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ...core.errors import ModelError
from ...core.queues import QUEUE_ANNOTATION
from .core_defaults import canonicalize_resources

# What Volcano's chart (v1.14) enables, its webhook-manager's --enabled-admission: no PodGroup or Pod
# mutator (measured: the e2e control plane installs Volcano from that chart).
CHART_ADMISSIONS = ("/jobs/mutate", "/jobs/validate", "/podgroups/validate", "/queues/mutate", "/queues/validate",
                    "/hypernodes/validate", "/cronjobs/validate")
RESOURCE_GROUP_ANNOTATION = "volcano.sh/resource-group"


def mutate_job(job: dict[str, Any]) -> None:
    spec = job.setdefault("spec", {})
    if not spec.get("queue"):
        spec["queue"] = "default"
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "volcano"
    if not spec.get("maxRetry"):
        spec["maxRetry"] = 3
    tasks = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
    patched = False  # set by each default, as mutateSpec's own flag is
    for index, task in enumerate(tasks):
        if not task.get("name"):
            task["name"], patched = f"default{index}", True
        pod_spec = (task.get("template") or {}).get("spec") or {}
        if pod_spec.get("hostNetwork") is True and not pod_spec.get("dnsPolicy"):
            pod_spec["dnsPolicy"], patched = "ClusterFirstWithHostNet", True
        if task.get("minAvailable") is None:
            task["minAvailable"], patched = task.get("replicas", 0), True
        if not task.get("maxRetry"):
            task["maxRetry"], patched = 3, True
    if patched:  # mutateSpec replaces /spec/tasks with every task as its Go types serialize it
        for task in tasks:
            _as_go_serializes(task)
    if not spec.get("minAvailable"):
        spec["minAvailable"] = sum(task["minAvailable"] for task in tasks)
    plugins = spec.get("plugins")
    if isinstance(plugins, dict):
        if {"tensorflow", "mpi", "pytorch", "ray"} & set(plugins):
            plugins.setdefault("svc", [])
        if "mpi" in plugins:
            plugins.setdefault("ssh", [])


def _as_go_serializes(task: dict[str, Any]) -> None:
    """A task as encoding/json writes Volcano's TaskSpec (measured against Volcano v1.14.1): each
    container's ``resources`` (a struct, never omitted) with canonical quantities, and an env var's
    empty ``value`` (omitempty) dropped."""
    pod_spec = (task.get("template") or {}).get("spec")
    if not isinstance(pod_spec, dict):
        return
    for kind in ("initContainers", "containers"):
        for container in pod_spec.get(kind) or []:
            if not isinstance(container, dict):
                continue
            if container.get("resources") is None:
                container["resources"] = {}
            canonicalize_resources(container["resources"], round_up_to_milli=False)  # no defaulting: a CRD
            for env in container.get("env") or []:
                if isinstance(env, dict) and env.get("value") == "":
                    del env["value"]


def mutate_pod_group(group: dict[str, Any], namespace_annotations: Mapping[str, str]) -> None:
    spec = group.setdefault("spec", {})
    if spec.get("queue", "default") == "default" and namespace_annotations.get(QUEUE_ANNOTATION):
        spec["queue"] = namespace_annotations[QUEUE_ANNOTATION]


def mutate_pod(pod: dict[str, Any], namespace: str, resource_groups: list[dict[str, Any]]) -> None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    spec = pod.setdefault("spec", {})
    for group in resource_groups:
        if not _belongs(group, namespace, annotations):
            continue
        if group.get("labels"):
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **group["labels"]}
        if group.get("affinity") and not spec.get("affinity"):
            spec["affinity"] = json.loads(group["affinity"])
        if group.get("tolerations"):
            spec["tolerations"] = [*(spec.get("tolerations") or []), *copy.deepcopy(group["tolerations"])]
        if group.get("schedulerName"):
            spec["schedulerName"] = group["schedulerName"]
        return


def _belongs(group: dict[str, Any], namespace: str, annotations: Mapping[str, str]) -> bool:
    selector = group.get("object") or {}
    key, values = selector.get("key", ""), selector.get("value") or []
    if key == "namespace":
        return namespace in values
    if key not in ("", "annotation"):
        return False
    for value in values:
        wanted = yaml.safe_load(value) if isinstance(value, str) else None
        if isinstance(wanted, dict) and any(annotations.get(k) == v for k, v in wanted.items()):
            return True
    return key == "" and annotations.get(RESOURCE_GROUP_ANNOTATION) == group.get("resourceGroup")


def read_admission_config(path: str | Path) -> list[dict[str, Any]]:
    """The ``resourceGroups`` of Volcano's webhook admission config (the volcano-admission-configmap's
    ``volcano-admission.conf``); ModelError naming the file when it is not one."""
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ModelError(f"{path}: cannot read Volcano's admission config: {exc}") from exc
    if document is None or (isinstance(document, dict) and document.get("resourceGroups") is None):
        return []  # as Volcano's chart ships it (every line a comment): no resource groups, which Volcano accepts
    groups = document.get("resourceGroups") if isinstance(document, dict) else None
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ModelError(f"{path}: Volcano's admission config needs a resourceGroups list")
    for group in groups:
        if group.get("affinity"):
            try:
                json.loads(group["affinity"])
            except (TypeError, ValueError) as exc:
                raise ModelError(f"{path}: resource group {group.get('resourceGroup')}: affinity is not JSON") from exc
    return groups
