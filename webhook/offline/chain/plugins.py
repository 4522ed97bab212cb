"""The API server's built-in mutating admission plugins that change a Pod before any webhook.

They run in the order of kube-apiserver's ``AllOrderedPlugins``
(kubernetes/kubernetes ``pkg/kubeapiserver/options/plugins.go``): ServiceAccount, then Priority,
then DefaultTolerationSeconds, all before MutatingAdmissionPolicy and MutatingAdmissionWebhook.
Each acts on Pod CREATE only (not on subresources), as here. LimitRanger, which fills in
resources from a namespace's LimitRange, is not modelled: it needs LimitRange objects.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ...core.errors import AdmissionRefused

TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
_RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


def service_account(pod: dict[str, Any]) -> None:
    """plugin/pkg/admission/serviceaccount: the ``default`` ServiceAccount and its projected token.

    The ``kube-api-access-*`` volume (a bound token, the cluster CA and the namespace) is mounted
    read-only in every container and init container that has nothing at the token path, unless
    the pod opts out with ``automountServiceAccountToken: false``. The volume's name ends in five
    random characters; the model derives them from the pod's name so its output is repeatable.
    """
    spec = pod.setdefault("spec", {})
    if _annotations(pod).get("kubernetes.io/config.mirror") is not None:
        return
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = "default"
    spec["serviceAccount"] = spec["serviceAccountName"]  # the deprecated field v1 serves back
    if spec.get("automountServiceAccountToken") is False:
        return
    volumes = spec.setdefault("volumes", [])
    existing = next((v["name"] for v in volumes if isinstance(v, dict)
                     and str(v.get("name", "")).startswith("kube-api-access-")), None)
    name = existing or "kube-api-access-" + _suffix(pod)
    if existing is None:
        volumes.append({"name": name, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}})
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            mounts = container.setdefault("volumeMounts", [])
            if not any(m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts if isinstance(m, dict)):
                mounts.append({"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH})


def priority(pod: dict[str, Any], classes: dict[str, PriorityClass]) -> None:
    """plugin/pkg/admission/priority: ``spec.priority`` (and preemptionPolicy) from the class.

    No class: the cluster's globalDefault class is named and its value set, else priority 0. An
    unknown class, or a ``spec.priority`` that differs from the class's value, is refused.
    """
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName") or ""
    if not name:
        default = min((c for c in classes.values() if c.global_default), key=lambda c: c.value, default=None)
        resolved = default or PriorityClass("", 0)
        if default is not None:
            spec["priorityClassName"] = default.name
    elif name in SYSTEM_PRIORITY_CLASSES:
        resolved = PriorityClass(name, SYSTEM_PRIORITY_CLASSES[name])
    elif name in classes:
        resolved = classes[name]
    else:
        raise AdmissionRefused(f"Priority admission plugin: no PriorityClass with name {name} was found")
    if spec.get("priority") is not None and spec["priority"] != resolved.value:
        raise AdmissionRefused(f"Priority admission plugin: the integer value of priority ({spec['priority']}) must "
                               f"not be provided in pod spec; it computed {resolved.value} from the PriorityClass")
    spec["priority"] = resolved.value
    if spec.get("preemptionPolicy") not in (None, resolved.preemption_policy):
        raise AdmissionRefused(f"Priority admission plugin: preemptionPolicy {spec['preemptionPolicy']} differs from "
                               f"the PriorityClass's {resolved.preemption_policy}")
    spec["preemptionPolicy"] = resolved.preemption_policy


def default_toleration_seconds(pod: dict[str, Any]) -> None:
    """plugin/pkg/admission/defaulttolerationseconds: evict from a not-ready or unreachable node
    after 300 s, unless the pod already tolerates that taint's NoExecute effect."""
    spec = pod.setdefault("spec", {})
    tolerations = spec.get("tolerations") or []
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        tolerated = any(isinstance(t, dict) and t.get("key", "") in ("", key)
                        and t.get("effect", "") in ("", "NoExecute") for t in tolerations)
        if not tolerated:
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    spec["tolerations"] = tolerations


def _suffix(pod: dict[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    digest = hashlib.sha256(f"{metadata.get('namespace')}/{metadata.get('name')}".encode()).digest()
    return "".join(_RANDOM_ALPHABET[b % len(_RANDOM_ALPHABET)] for b in digest[:5])


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}
