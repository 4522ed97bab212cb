"""Pod controllers are judged by the pods they will create.

A Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, batch Job or CronJob
whose template breaks a rule would be admitted while every pod it creates is denied, visible only
as controller events. So /validate judges the template instead, as the pod the controller will
create and vgate's own mutation will deliver: the template's metadata and spec in the
controller's namespace and under its name, mutated (queue, scheduler, priority, QoS) exactly as
/mutate will mutate the pod, then evaluated as a Pod CREATE by the same rules. Rules therefore
need no controller knowledge, and a template that relies on vgate's injection is not denied for
what vgate will add. Messages name the controller: ``Deployment web: container app ...``.

An UPDATE that leaves the template as it was creates no new pods and is not judged (scaling,
labels, rollout pauses); one that changes it is judged like a CREATE.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import orjson

from . import mutators
from .admission import AdmissionRequest
from .config import Config
from .contract import EngineInput, PolicyResult, Violation
from .kind_handler import Judged, KindContext, PodSpecs
from .patching import patch_for

Template = Callable[[Mapping[str, Any] | None], dict[str, Any] | None]


def template_at(*path: str) -> Template:
    """Where a controller keeps its pod template: ``spec.template``, or a CronJob's
    ``spec.jobTemplate.spec.template``."""
    def template(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
        found: Any = obj
        for key in path:
            found = found.get(key) if isinstance(found, dict) else None
        return found if isinstance(found, dict) else None
    return template


def template_pod_specs(template: Template) -> Callable[[Mapping[str, Any]], PodSpecs]:
    """A controller's one pod spec, in its template."""
    def pod_specs(obj: Mapping[str, Any]) -> PodSpecs:
        return [("the pod template", (template(obj) or {}).get("spec"))]
    return pod_specs


def changes_template(template: Template) -> Callable[[AdmissionRequest], bool]:
    """CREATE, or an UPDATE that gives the controller a different template (and so new pods)."""
    def new_pods(request: AdmissionRequest) -> bool:
        return request.operation != "UPDATE" or template(request.object) != template(request.old_object)
    return new_pods


def judged_as_pod(template: Template) -> Callable[[AdmissionRequest, Config, KindContext], list[Judged]]:
    """A controller judged as the pod its template makes (``pod_of``), its messages titled with it."""
    def judged(request: AdmissionRequest, config: Config, context: KindContext) -> list[Judged]:
        pod, evaluated = pod_of(request, template, config, context.namespace_queue)
        return [Judged(f"{request.kind} {controller_name(request)}: ", pod, evaluated)]
    return judged


def controller_name(request: AdmissionRequest) -> str:
    metadata = (request.object or {}).get("metadata") or {}
    return request.name or (f"{metadata['generateName']}*" if metadata.get("generateName") else "(generated name)")


def pod_of(request: AdmissionRequest, template_in: Template, config: Config,
           namespace_queue: str | None = None) -> tuple[dict[str, Any], EngineInput]:
    """The pod the controller will create, as /mutate delivers it, and the review to evaluate it in.

    Raises ValueError for a controller without a template object (the API server rejects those).
    """
    template = template_in(request.object)
    if template is None or not isinstance(template.get("spec"), dict):
        raise ValueError(f"{request.kind} {controller_name(request)} has no pod template (spec.template)")
    metadata = dict(template.get("metadata") or {})
    metadata.update(name=request.name or metadata.get("name", ""), namespace=request.namespace)
    return as_delivered(request, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]},
                        config, namespace_queue)


def as_delivered(request: AdmissionRequest, pod: dict[str, Any], config: Config,
                 namespace_queue: str | None = None) -> tuple[dict[str, Any], EngineInput]:
    """``pod`` (one a controller or an application will create in the request's namespace) as
    /mutate will deliver it, and the review of its CREATE to evaluate it in."""
    pod["metadata"]["namespace"] = request.namespace
    pod = jsonpatch.apply_patch(pod, patch_for(mutators.POD, pod, request.namespace, config, namespace_queue).patch)
    review = orjson.loads(orjson.dumps(request.review))
    review["request"].update(
        kind={"group": "", "version": "v1", "kind": "Pod"}, resource={"group": "", "version": "v1", "resource": "pods"},
        operation="CREATE", object=pod, oldObject=None)
    review["request"].pop("subResource", None)
    return pod, EngineInput.of(review)


def named_for(result: PolicyResult, title: str) -> PolicyResult:
    """Rule messages about a pod to be created, retitled with what creates it (``Deployment web: ``)."""
    def retitle(violations: tuple[Violation, ...]) -> tuple[Violation, ...]:
        return tuple(Violation(v.rule, title + v.message.removeprefix("Pod: "), v.level) for v in violations)

    return PolicyResult(retitle(result.deny), retitle(result.warn))
