"""Spark on Volcano: a SparkApplication judged as the pods it will create, and Spark's own pods.

The Spark operator (``sparkoperator.k8s.io/v1beta2``) turns a SparkApplication into spark-submit,
whose pod builder makes the driver pod; the driver then makes the executor pods. Nothing of the
application is judged by the pod rules until those pods exist, long after the user could have been
told, so vgate judges the application at admission as its two pods (``spark_pods``): what
spark-submit's builder makes of ``spec.driver`` and ``spec.executor`` (labels with ``spark-role``,
node selectors merged with ``spec.nodeSelector``, affinity, tolerations, security contexts, host
network, volumes, the image, and the container sized as Spark sizes it: ``memory`` plus
``memoryOverhead`` as request and limit, ``cores``/``coreRequest`` and ``coreLimit`` as CPU).

Sizes are Spark's, not Kubernetes': ``512m``, ``4g`` (binary multiples; a bare number is MiB).
A size Spark would not parse (``4Gi``) is a SparkSpecError, answered with the field and the form
Spark wants. The overhead, when not given, is ``memoryOverheadFactor`` (0.10 for JVM
applications, 0.40 for Python and R) of the memory, at least 384 MiB, as Spark computes it.

Spark's own pods: an executor (``spark-role: executor``) carries only what its configuration
gives it; its driver is an owner (an ownerReference to the driver pod, among any others:
``owner_pods``). The owners' classification labels (the sensitive label and the egress label, which
the gateway names; a restricting value wins, ``owners_classification``) are the executor's too, so an
executor of a sensitive driver is judged, and labelled by /mutate, as sensitive (core/handlers.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import SparkSpecError
from .queues import QUEUE_ANNOTATION

SPARK_ROLE = "spark-role"
APP_NAME_LABEL = "spark-app-name"
MIN_OVERHEAD_MIB = 384
_UNITS = {"": 1 / 1024, "b": 1 / 1024**2, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2, "p": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([bkmgtp]?)b?\s*$", re.IGNORECASE)
ROLES = (("spec.driver", "driver"), ("spec.executor", "executor"))


def app_path(kind: str | None) -> tuple[str, ...]:
    """Where the application spec is: a SparkApplication's ``spec``, a ScheduledSparkApplication's
    ``spec.template`` (what it creates a SparkApplication of)."""
    return ("spec", "template") if kind == "ScheduledSparkApplication" else ("spec",)


def app_spec(obj: Mapping[str, Any] | None, kind: str) -> dict[str, Any]:
    """The application spec (``app_path``), or {} where the object has none."""
    found: Any = obj or {}
    for key in app_path(kind):
        found = found.get(key) if isinstance(found, dict) else None
    return found if isinstance(found, dict) else {}


def spark_mebibytes(value: Any, where: str) -> int:
    """A Spark size in MiB (``512m``, ``4g``, ``2048`` = MiB, ``1536k``); SparkSpecError otherwise."""
    match = _SIZE.match(str(value)) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if match is None:
        raise SparkSpecError(f"{where} {value!r} is not a size Spark reads: write it as Spark does, e.g. 512m or "
                             "4g (k, m, g, t; a bare number is MiB; Kubernetes units such as Gi are not Spark's)")
    number, unit = int(match[1]), match[2].lower()
    if isinstance(value, int) or unit == "" and str(value).strip().isdigit():
        return number  # spark.driver.memory without a unit is MiB
    return max(1, int(number * _UNITS[unit]))


def container_resources(app: dict[str, Any], role: dict[str, Any], where: str) -> dict[str, dict[str, str]]:
    """The requests and limits spark-submit gives the role's container."""
    memory = spark_mebibytes(role.get("memory", "1g"), f"{where}.memory")
    if role.get("memoryOverhead") is not None:
        overhead = spark_mebibytes(role["memoryOverhead"], f"{where}.memoryOverhead")
    else:
        factor = app.get("memoryOverheadFactor")
        try:
            ratio = float(factor) if factor is not None else (0.4 if app.get("type") in ("Python", "R") else 0.1)
        except (TypeError, ValueError):
            raise SparkSpecError(f"spec.memoryOverheadFactor {factor!r} is not a number") from None
        overhead = max(int(memory * ratio), MIN_OVERHEAD_MIB)
    size = f"{memory + overhead}Mi"
    cpu = str(role.get("coreRequest") or role.get("cores") or 1)
    resources = {"requests": {"cpu": cpu, "memory": size}, "limits": {"memory": str(role.get("memoryLimit") or size)}}
    if role.get("coreLimit"):
        resources["limits"]["cpu"] = str(role["coreLimit"])
    return resources


def spark_pods(obj: Mapping[str, Any], kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(``spec.driver``/``spec.executor``, the pod spark-submit and the driver will create) of an application.

    Raises SparkSpecError for a role that is missing or sized in a way Spark would not read.
    """
    app = app_spec(obj, kind)
    name = str(((obj.get("metadata") or {}).get("name")) or "spark-app")
    pods = []
    for where, role_name in ROLES:
        role = app.get(role_name)
        if not isinstance(role, dict):
            raise SparkSpecError(f"{where} is missing: a SparkApplication names its driver and its executors")
        pods.append((where, _pod(app, role, role_name, name, where)))
    return pods


def role_pod_specs(obj: Mapping[str, Any], kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(``spec.driver``/``spec.executor``, its pod's spec) of each role the application names, unsized:
    what the size limits count (the role's container, its sidecars and init containers)."""
    app = app_spec(obj, kind)
    return [(where, _pod(app, role, role_name, "spark-app", where, sized=False)["spec"])
            for where, role_name in ROLES if isinstance(role := app.get(role_name), dict)]


# sparkConf keys that shape the pods, as Spark reads them (resource-managers/kubernetes/core/.../k8s/
# Config.scala and KubernetesConf.scala: a role's node selector is the general one with the role's
# own added over it, BasicDriverFeatureStep/BasicExecutorFeatureStep); the operator turns its spec
# fields into the same keys (spark-operator internal/controller/sparkapplication/submission.go,
# buildSparkSubmitArgs: sparkConfOption, then driverConfOption, executorConfOption and
# nodeSelectorOption, whose labels, role images and node selectors come after sparkConf's), and
# spark-submit keeps the last of a repeated --conf, so the spec's own wins.
NODE_SELECTOR = "spark.kubernetes.node.selector."
IMAGE = "spark.kubernetes.container.image"
UNJUDGEABLE = ("podTemplateFile", "podTemplateContainerName")  # files on the submitter's disk


def _role_conf(role_name: str) -> tuple[str, str, str]:
    """The sparkConf prefixes of a role: its labels, its node selector, its image."""
    return (f"spark.kubernetes.{role_name}.label.", f"spark.kubernetes.{role_name}.node.selector.",
            f"spark.kubernetes.{role_name}.container.image")


def _prefixed(conf: Mapping[str, Any], prefix: str) -> dict[str, str]:
    return {key[len(prefix):]: str(value) for key, value in conf.items() if key.startswith(prefix) and key != prefix}


def spark_conf(app: Mapping[str, Any], strict: bool = True) -> dict[str, str]:
    """``sparkConf`` as strings; with ``strict``, SparkSpecError for what vgate cannot judge: a pod
    template file (on the submitter's disk, never seen at admission). Not strict: what the size
    limits count, before anything is judged. A ``sparkConfigMap``'s spark-defaults.conf is read by the
    handler and given here under sparkConf (``with_defaults``)."""
    conf = app.get("sparkConf")
    conf = {str(key): str(value) for key, value in conf.items()} if isinstance(conf, Mapping) else {}
    if not strict:
        return conf
    for key in conf:
        if key.startswith("spark.kubernetes.") and key.rsplit(".", 1)[-1] in UNJUDGEABLE:
            raise SparkSpecError(f"sparkConf {key} names a pod template file vgate cannot read at admission: "
                                 "give the template as spec.driver.template / spec.executor.template")
    return conf


def spark_defaults(text: str) -> dict[str, str]:
    """spark-defaults.conf as Spark loads it (java.util.Properties: ``key value``, ``key=value`` or
    ``key:value``; ``#`` and ``!`` comments)."""
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        parts = re.split(r"\s*[=:]\s*|\s+", line, maxsplit=1)
        found[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return found


def with_defaults(obj: Mapping[str, Any], kind: str, defaults: Mapping[str, str]) -> dict[str, Any]:
    """The application with its sparkConfigMap's settings under its sparkConf (spark-submit reads
    spark-defaults.conf first; a --conf, which sparkConf and the spec become, wins)."""
    copied: dict[str, Any] = copy.deepcopy(dict(obj))
    app = app_spec(copied, kind)
    app["sparkConf"] = {**defaults, **(app.get("sparkConf") or {})}
    return copied


def role_labels(app: Mapping[str, Any], role_name: str) -> dict[str, str]:
    """The labels a role's pod gets from the application: its template's, sparkConf's, its own."""
    found = app.get(role_name)
    role: dict[str, Any] = found if isinstance(found, dict) else {}
    template: dict[str, Any] = role["template"] if isinstance(role.get("template"), dict) else {}
    return {**((template.get("metadata") or {}).get("labels") or {}),
            **_prefixed(spark_conf(app, strict=False), _role_conf(role_name)[0]), **(role.get("labels") or {})}


def unjudged_conf(obj: Mapping[str, Any], kind: str) -> list[str]:
    """The sparkConf keys that may shape the pods (``spark.kubernetes.*``) and that vgate does not model:
    said in the decision's warnings, never ignored silently."""
    conf = app_spec(obj, kind).get("sparkConf")
    if not isinstance(conf, Mapping):
        return []
    modelled = (NODE_SELECTOR, IMAGE, *(p for role in ("driver", "executor") for p in _role_conf(role)))
    return sorted(f"sparkConf {key} is not judged by vgate (it may shape the pods; check it)" for key in conf
                  if str(key).startswith("spark.kubernetes.") and not str(key).startswith(modelled))


def _pod(app: dict[str, Any], role: dict[str, Any], role_name: str, app_name: str, where: str,
         sized: bool = True) -> dict[str, Any]:
    template: dict[str, Any] = role["template"] if isinstance(role.get("template"), dict) else {}
    conf = spark_conf(app, strict=sized)
    _, selector_prefix, image_key = _role_conf(role_name)
    metadata = dict(template.get("metadata") or {})
    metadata["name"] = f"{app_name}-driver" if role_name == "driver" else f"{app_name}-exec-1"
    metadata["labels"] = {**role_labels(app, role_name), SPARK_ROLE: role_name, APP_NAME_LABEL: app_name}
    if role.get("annotations") or metadata.get("annotations"):
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **(role.get("annotations") or {})}
    spec = dict(template.get("spec") or {})
    options = app.get("batchSchedulerOptions") or {}
    scheduler = role.get("schedulerName") or ("volcano" if app.get("batchScheduler") == "volcano" else None)
    priority = role.get("priorityClassName") or options.get("priorityClassName")
    selector = {**(spec.get("nodeSelector") or {}), **_prefixed(conf, NODE_SELECTOR),
                **(app.get("nodeSelector") or {}), **_prefixed(conf, selector_prefix),
                **(role.get("nodeSelector") or {})}
    fields = {"schedulerName": scheduler, "priorityClassName": priority, "nodeSelector": selector or None,
              "affinity": role.get("affinity"), "tolerations": role.get("tolerations"),
              "hostNetwork": role.get("hostNetwork"), "securityContext": role.get("podSecurityContext"),
              "serviceAccountName": role.get("serviceAccount"),
              "shareProcessNamespace": role.get("shareProcessNamespace"),
              "volumes": app.get("volumes"), "initContainers": role.get("initContainers")}
    spec.update({key: value for key, value in fields.items() if value is not None})
    # the operator passes the role's image (or spec.image) as spark.kubernetes.<role>.container.image
    # after sparkConf's, so sparkConf's image keys count only where the spec names no image
    image = role.get("image") or app.get("image") or conf.get(image_key) or conf.get(IMAGE) or ""
    container: dict[str, Any] = {"name": f"spark-kubernetes-{role_name}", "image": image}
    if sized:
        container["resources"] = container_resources(app, role, where)
    for key, field in (("securityContext", "securityContext"), ("volumeMounts", "volumeMounts"), ("ports", "ports"),
                       ("env", "env"), ("lifecycle", "lifecycle")):
        if role.get(field) is not None:
            container[key] = role[field]
    spec["containers"] = [container, *(role.get("sidecars") or [])]
    if options.get("queue"):
        metadata.setdefault("annotations", {})[QUEUE_ANNOTATION] = options["queue"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def executor_instances(obj: Mapping[str, Any], kind: str) -> int:
    """The most executors the application may run: instances, or dynamic allocation's maximum."""
    app = app_spec(obj, kind)
    counts = [(app.get("executor") or {}).get("instances"), (app.get("dynamicAllocation") or {}).get("maxExecutors")]
    return max([count for count in counts if isinstance(count, int) and not isinstance(count, bool)] or [1])


def owner_pods(pod: Mapping[str, Any]) -> list[str]:
    """Every pod that owns ``pod``: a Spark executor's driver, wherever it stands among the owners
    (Spark appends its driver to the owners a pod template already names), with or without the
    executor's spark-role label (a template may drop it)."""
    metadata = pod.get("metadata")
    owners = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    return [str(o["name"]) for o in owners or [] if isinstance(o, dict) and o.get("kind") == "Pod" and o.get("name")]


def contradicting(own: Mapping[str, str], theirs: Mapping[str, str], classification: Mapping[str, str]) -> list[str]:
    """The classification keys ``own`` sets to another value where ``theirs`` carries the restricting
    one: a member's label that would weaken its unit's (refused, never overridden)."""
    return [key for key, value in theirs.items() if key in own and own[key] != value and value == classification[key]]


def owners_classification(owners: Sequence[Mapping[str, str]], classification: Mapping[str, str]) -> dict[str, str]:
    """The classification labels (``classification``: key -> the value that restricts) the owners
    carry together: a restricting value wherever one owner carries it, else the first owner's."""
    found: dict[str, str] = {}
    for labels in owners:
        for key, restricting in classification.items():
            if key in labels and (key not in found or labels[key] == restricting):
                found[key] = labels[key]
    return found
