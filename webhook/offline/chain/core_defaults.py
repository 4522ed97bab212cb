"""The API server's built-in defaulting of Pods and pod templates, before any admission plugin.

Kubernetes decodes every request into its Go types and runs their defaulting functions, so a
webhook never sees a Pod without ``schedulerName``, ``restartPolicy`` or ``dnsPolicy``. What this
module fills in, each from kubernetes/kubernetes ``pkg/apis/core/v1/defaults.go`` unless noted:

- ``SetDefaults_PodSpec``: ``dnsPolicy: ClusterFirst``, ``restartPolicy: Always``,
  ``securityContext: {}``, ``terminationGracePeriodSeconds: 30``, ``schedulerName: default-scheduler``;
- ``SetDefaults_Pod`` (Pods only, not templates): each container's missing requests from its
  limits, ``enableServiceLinks: true``, and with ``hostNetwork`` each port's ``hostPort`` from
  its ``containerPort``;
- ``SetDefaults_Container`` (and ephemeral containers): ``imagePullPolicy`` (``Always`` for
  ``:latest`` or no tag, else ``IfNotPresent``), ``terminationMessagePath: /dev/termination-log``,
  ``terminationMessagePolicy: File``, ``resources: {}`` (an empty struct the API server always
  serves back); a port's ``protocol: TCP`` (declarative default in
  staging/src/k8s.io/api/core/v1/types.go);
- ``SetDefaults_Probe`` and ``SetDefaults_HTTPGetAction`` for liveness, readiness and startup
  probes and lifecycle hooks; ``SetDefaults_ObjectFieldSelector`` (``apiVersion: v1``);
- ``SetDefaults_Volume`` (no source: ``emptyDir: {}``), ``defaultMode: 420`` of secret,
  configMap, downwardAPI and projected volumes, ``SetDefaults_HostPathVolumeSource`` (``type: ""``),
  ``SetDefaults_ServiceAccountTokenProjection`` (``expirationSeconds: 3600``).

Every container's requests and limits are re-serialized in resource.Quantity's canonical form
(``0.5`` is served back as ``500m``, ``2048Mi`` as ``2Gi``: measured against kube-apiserver 1.34 in
tests/e2e). Deployments and ReplicaSets get their own defaults and empty status as measured there
(``default_controller``); other controllers' own fields are not defaulted (vgate reads only their
templates). Not modelled: pod-level resources and defaults of rarely used volume types.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from ...core.quantity import canonical_quantity

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_SPEC_DEFAULTS = {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                  "schedulerName": "default-scheduler"}
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_MODED_VOLUMES = ("secret", "configMap", "downwardAPI", "projected")
_VOLUME_SOURCES = ("hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs",
                   "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker",
                   "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk",
                   "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral",
                   "image")


def default_pod(pod: dict[str, Any]) -> None:
    """Default a Pod in place, as the API server decodes it."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    default_pod_spec(spec)
    for container in _containers(spec, ("initContainers", "containers")):
        resources = container.get("resources")
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
        if spec.get("hostNetwork") is True:
            for port in _dicts(container.get("ports")):
                if not port.get("hostPort") and "containerPort" in port:
                    port["hostPort"] = port["containerPort"]
    spec.setdefault("enableServiceLinks", True)


def default_pod_spec(spec: dict[str, Any]) -> None:
    """Default a PodSpec in place (a Pod's, or a template's: SetDefaults_PodSpec and below)."""
    for name, value in _SPEC_DEFAULTS.items():
        if spec.get(name) in (None, ""):
            spec[name] = value
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    for container in _containers(spec, _CONTAINER_LISTS):
        _default_container(container)
    for volume in _dicts(spec.get("volumes")):
        _default_volume(volume)


def _default_container(container: dict[str, Any]) -> None:
    if container.get("resources") is None:
        container["resources"] = {}  # a struct, not a pointer, in the Go type: always served, if empty
    canonicalize_resources(container["resources"])
    if not container.get("imagePullPolicy"):
        latest = image_tag(str(container.get("image", ""))) == "latest"
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    if not container.get("terminationMessagePath"):
        container["terminationMessagePath"] = "/dev/termination-log"
    if not container.get("terminationMessagePolicy"):
        container["terminationMessagePolicy"] = "File"
    for port in _dicts(container.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(probe_name)
        if isinstance(probe, dict):
            for name, value in _PROBE_DEFAULTS.items():
                if not probe.get(name):
                    probe[name] = value
            _default_http_get(probe.get("httpGet"))
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            if isinstance(lifecycle.get(hook), dict):
                _default_http_get(lifecycle[hook].get("httpGet"))
    for env in _dicts(container.get("env")):
        value_from = env.get("valueFrom")
        if isinstance(value_from, dict):
            _default_field_ref(value_from.get("fieldRef"))


def canonicalize_resources(resources: Any, *, round_up_to_milli: bool = True) -> None:
    """Requests and limits as the API server serves them back: each quantity decoded, rounded up to
    milli (SetDefaults_ResourceList, built-in types only) and re-serialized (resource.Quantity's
    canonical form: "1000m" -> "1", "2048Mi" -> "2Gi", 0.5 -> "500m", "1n" -> "1m")."""
    if not isinstance(resources, dict):
        return
    for kind in ("limits", "requests"):
        values = resources.get(kind)
        if isinstance(values, dict):
            for name, value in values.items():
                try:
                    values[name] = canonical_quantity(value, round_up_to_milli=round_up_to_milli)
                except ValueError:
                    pass  # not a quantity: the API server refuses the object before any webhook


def _default_http_get(action: Any) -> None:
    if isinstance(action, dict):
        if not action.get("path"):
            action["path"] = "/"
        if not action.get("scheme"):
            action["scheme"] = "HTTP"


def _default_field_ref(field_ref: Any) -> None:
    if isinstance(field_ref, dict) and not field_ref.get("apiVersion"):
        field_ref["apiVersion"] = "v1"


def _default_volume(volume: dict[str, Any]) -> None:
    if not any(volume.get(source) is not None for source in _VOLUME_SOURCES):
        volume["emptyDir"] = {}
    for source in _MODED_VOLUMES:
        if isinstance(volume.get(source), dict) and volume[source].get("defaultMode") is None:
            volume[source]["defaultMode"] = 420
    if isinstance(volume.get("hostPath"), dict) and volume["hostPath"].get("type") is None:
        volume["hostPath"]["type"] = ""
    downward_volume = volume.get("downwardAPI")
    for item in _dicts(downward_volume.get("items") if isinstance(downward_volume, dict) else None):
        _default_field_ref(item.get("fieldRef"))
    projected = volume.get("projected")
    for projection in _dicts(projected.get("sources") if isinstance(projected, dict) else None):
        token = projection.get("serviceAccountToken")
        if isinstance(token, dict) and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = 3600
        downward = projection.get("downwardAPI")
        for item in _dicts(downward.get("items") if isinstance(downward, dict) else None):
            _default_field_ref(item.get("fieldRef"))


def image_tag(image: str) -> str:
    """The tag of an image reference as Kubernetes' parsers.ParseImageName reads it: ``latest``
    when there is neither tag nor digest, empty when there is only a digest."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return "" if digest else "latest"


def _containers(spec: dict[str, Any], lists: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    for name in lists:
        yield from _dicts(spec.get(name))


def _dicts(items: Any) -> Iterator[dict[str, Any]]:
    if isinstance(items, list):
        yield from (item for item in items if isinstance(item, dict))


# SetDefaults_Deployment and SetDefaults_ReplicaSet (pkg/apis/apps/v1/defaults.go), and the status
# each Go type always serializes (measured against kube-apiserver 1.34).
_CONTROLLER_DEFAULTS: dict[str, dict[str, Any]] = {
    "Deployment": {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                   "strategy": {"type": "RollingUpdate"}},  # its rollingUpdate: 25% and 25%, below
    "ReplicaSet": {"replicas": 1},
}
_CONTROLLER_STATUS: dict[str, dict[str, Any]] = {"Deployment": {}, "ReplicaSet": {"replicas": 0}}


def default_controller(obj: dict[str, Any], kind: str) -> None:
    """A Deployment's or ReplicaSet's own defaults (its template is defaulted as a PodSpec)."""
    spec = obj.get("spec")
    if kind not in _CONTROLLER_DEFAULTS or not isinstance(spec, dict):
        return
    for name, value in _CONTROLLER_DEFAULTS[kind].items():
        if spec.get(name) is None:
            spec[name] = copy.deepcopy(value)
    strategy = spec.get("strategy")
    if kind == "Deployment" and isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
    if obj.get("status") is None:
        obj["status"] = copy.deepcopy(_CONTROLLER_STATUS[kind])
