"""/validate: turn the policy result for one request into an admission decision.

Pure: the request, an engine, the config, the exceptions in force and the time in; a Validation
out. Unknown kinds and exempt namespaces never reach the engine. When the engine fails, the
configured failure mode decides (default deny, with the reason), so a broken policy never
silently admits what it was meant to stop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from .admission import AdmissionRequest, Decision
from .config import Config
from .contract import EngineInput, PolicyEngine, PolicyResult
from .enforcement import Outcome, enforce
from .errors import EvaluationError, SparkSpecError
from .kinds import Workload
from .pod_templates import as_delivered, controller_name, named_for, pod_of, template_changed
from .policy_exceptions import PolicyException
from .size_limits import oversize
from .spark import executor_instances, spark_pods
from .workloads import HANDLED_KINDS, classify, is_exempt, labels_of


@dataclass
class Validation:
    """The decision and the rule outcomes behind it (for metrics and the audit trail)."""

    decision: Decision
    outcomes: list[Outcome] = field(default_factory=list)
    result: PolicyResult = field(default_factory=lambda: PolicyResult((), ()))  # the rules' say, before enforcement
    error: str | None = None
    exempt: bool = False
    engine: str | None = None  # which engine answered, when one was asked
    fallback: str | None = None  # why the RVM did not, when the interpreter answered instead

    def rules(self, action: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == action]


def _unjudged(request: AdmissionRequest, config: Config) -> Validation:
    """A kind vgate does not judge is allowed; a subresource of one it does judge that it does not
    know (a webhook configuration sending pods/* or jobs/*) is never a silent allow: refused, or
    allowed with a warning, per server.failureMode, and recorded either way."""
    if not request.sub_resource or (request.group, request.version, request.kind) not in HANDLED_KINDS:
        return Validation(Decision())
    reason = (f"vgate judges no {request.resource or request.kind}/{request.sub_resource} writes: its validating "
              "webhook should not be sent them (the chart registers pods/ephemeralcontainers and pods/resize)")
    if config.server.failure_mode == "allow":
        return Validation(Decision(warnings=[reason]), error=reason)
    return Validation(Decision(allowed=False, code=403, message=f"vgate denied {request.kind} {_name(request)}: "
                               f"{reason}", audit_annotations={"refused": "unknown-subresource"}), error=reason)


def validate(request: AdmissionRequest, engine: PolicyEngine, config: Config, exceptions: Sequence[PolicyException],
             now: datetime, namespace_queue: str | None = None,
             binding: Mapping[str, Any] | str | None = None, inherited: Mapping[str, str] | None = None) -> Validation:
    """Evaluate the policies on one request and decide.

    A pod controller is evaluated as the pod its template will create (``pod_templates``). A Binding
    is evaluated with ``binding`` (the pod, node and PodGroup the cluster state holds) as
    ``input.binding``; when that is a reason instead (not known yet, or no cluster state), the
    binding is answered per server.failureMode like an evaluation that failed: never allowed unjudged.
    ``inherited``: labels a Spark executor takes from its driver (``spark.inherited_labels``),
    judged as its own.
    """
    workload = classify(request)
    if workload is None:
        return _unjudged(request, config)
    if is_exempt(request.namespace, config):
        return Validation(Decision(), exempt=True)
    too_large = oversize(workload, request.object, request.kind, config)
    if too_large:
        message = f"vgate denied {request.kind} {_name(request)}: {too_large}"
        return Validation(Decision(allowed=False, code=403, message=message,
                                   audit_annotations={"refused": "too-large"}), error=None)
    obj = request.object or request.old_object or {}
    if workload in (Workload.POD_CONTROLLER, Workload.SPARK_APPLICATION) and not template_changed(request):
        return Validation(Decision())  # scaling, labels, status: no new pods
    if workload is Workload.BINDING and not isinstance(binding, Mapping):
        reason = binding or "vgate judges bindings from the cluster state, and cluster.watch is off"
        return _failed(request, f"cannot judge this binding: {reason}", engine.revision, config.server.failure_mode)
    try:
        if workload is Workload.SPARK_APPLICATION:
            _check_executors(obj, request.kind, config)
        judged = _judged(request, workload, obj, config, namespace_queue, binding, inherited)
        answers = [(title, engine.evaluate(evaluated)) for title, _, evaluated in judged]
    except SparkSpecError as refusal:  # its pods cannot be told, or it runs more executors than judged
        return Validation(Decision(allowed=False, code=403, message=f"vgate denied {request.kind} {_name(request)}: "
                                   f"{refusal}", audit_annotations={"refused": "spark-spec"}), error=None)
    except Exception as exc:  # noqa: BLE001 - any engine failure is answered per the failure mode
        reason = str(exc) if isinstance(exc, EvaluationError) else f"{type(exc).__name__}: {exc}"
        return _failed(request, reason, engine.revision, config.server.failure_mode)
    results = [named_for(answer.result, title) if title else answer.result for title, answer in answers]
    result = PolicyResult(tuple(v for r in results for v in r.deny), tuple(v for r in results for v in r.warn))
    outcomes = enforce(result, config, list(exceptions), namespace=request.namespace, name=request.name,
                       labels=labels_of(judged[0][1]), now=now)
    return Validation(_decide(request, outcomes, engine.revision), outcomes, result, engine=answers[0][1].engine,
                      fallback=answers[0][1].fallback)


def _judged(request: AdmissionRequest, workload: Workload, obj: dict[str, Any], config: Config,
            namespace_queue: str | None, binding: Mapping[str, Any] | str | None,
            inherited: Mapping[str, str] | None = None) -> list[tuple[str, dict[str, Any], EngineInput]]:
    """What the engine evaluates for a request: (the title its messages get, the object whose
    labels exceptions match, the input). A pod controller is the pod its template makes; a Spark
    application its driver and executor pods; a binding the request with ``input.binding``."""
    if workload is Workload.POD_CONTROLLER:
        pod, evaluated = pod_of(request, config, namespace_queue)
        return [(f"{request.kind} {controller_name(request)}: ", pod, evaluated)]
    if workload is Workload.SPARK_APPLICATION:
        return [(f"{request.kind} {_name(request)} {where}: ", *as_delivered(request, pod, config, namespace_queue))
                for where, pod in spark_pods(obj, request.kind)]
    if workload is Workload.BINDING and isinstance(binding, Mapping):
        return [("", dict(binding["pod"]), EngineInput.of({**request.review, "binding": dict(binding)}))]
    if inherited and workload is Workload.POD:
        review = orjson.loads(request.raw)
        labels = review["request"]["object"].setdefault("metadata", {}).setdefault("labels", {})
        labels.update(inherited)
        return [("", review["request"]["object"], EngineInput.of(review))]
    return [("", obj, EngineInput(request.raw, request.review))]


def _check_executors(obj: dict[str, Any], kind: str, config: Config) -> None:
    """SparkSpecError when a Spark application may run more executors than the gateway judges."""
    executors, most = executor_instances(obj, kind), config.server.max_tasks_per_job
    if executors > most:
        raise SparkSpecError(f"it may run {executors} executors; the gateway judges at most {most} "
                             "(server.maxTasksPerJob)")


def _decide(request: AdmissionRequest, outcomes: list[Outcome], revision: str) -> Decision:
    annotations = {"policy-revision": revision}
    decision = Decision(audit_annotations=annotations)
    for action, key in (("deny", "denied-rules"), ("warn", "warned-rules"), ("audit", "audited-rules"),
                        ("excepted", "excepted-rules")):
        rules = sorted({o.rule for o in outcomes if o.action == action})
        if rules:
            annotations[key] = ",".join(rules)
    decision.warnings = [f"[{o.rule}] {o.message}" for o in outcomes if o.action == "warn"]
    denials = [o for o in outcomes if o.action == "deny"]
    if denials:
        reasons = "; ".join(f"[{o.rule}] {o.message}" for o in denials)
        decision.allowed = False
        decision.code = 403
        decision.message = f"vgate denied {request.kind} {_name(request)}: {reasons}"
    return decision


def _failed(request: AdmissionRequest, reason: str, revision: str, failure_mode: str) -> Validation:
    annotations = {"policy-revision": revision, "evaluation-error": reason[:200]}
    if failure_mode == "allow":
        decision = Decision(warnings=[f"vgate could not evaluate policies ({reason}); admitted by failure mode allow"],
                            audit_annotations=annotations)
    else:
        decision = Decision(allowed=False, code=500, audit_annotations=annotations,
                            message=f"vgate could not evaluate policies for {request.kind} {_name(request)}: {reason}; "
                                    "failure mode is deny, so the request is refused")
    return Validation(decision, error=reason)


def _name(request: AdmissionRequest) -> str:
    name = request.name or "(generated name)"
    return f"{request.namespace}/{name}" if request.namespace else name
