"""/validate: turn the policy result for one request into an admission decision.

Pure: the request, an engine, the config and the exceptions in force in, a Decision out.
Unknown kinds and exempt namespaces never reach the engine. When the engine fails, the
configured failure mode decides (default deny, with the reason), so a broken policy never
silently admits what it was meant to stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import orjson

from .admission import AdmissionRequest, Decision
from .config import Config
from .enforcement import Outcome, enforce
from ..policy.regorus_engine import PolicyEngine, PolicyResult
from .errors import EvaluationError
from .policy_exceptions import PolicyException
from .pod_templates import named_for_controller, pod_of, template_changed
from .workloads import Workload, classify, is_exempt, labels_of


@dataclass
class Validation:
    """The decision and the rule outcomes behind it (for metrics and the audit trail)."""

    decision: Decision
    outcomes: list[Outcome] = field(default_factory=list)
    result: PolicyResult = field(default_factory=lambda: PolicyResult((), ()))  # what the rules said, before enforcement
    error: str | None = None
    exempt: bool = False

    def rules(self, action: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == action]


def validate(request: AdmissionRequest, input_json: str, engine: PolicyEngine, config: Config,
             exceptions: Sequence[PolicyException] = (), now: datetime | None = None) -> Validation:
    """Evaluate the policies on one request (given as the AdmissionReview's JSON text).

    A pod controller is evaluated as the pod its template will create (``pod_templates``).
    """
    workload = classify(request)
    if workload is None:
        return Validation(Decision())
    if is_exempt(request.namespace, config):
        return Validation(Decision(), exempt=True)
    obj = request.object or request.old_object or {}
    controller = workload is Workload.POD_CONTROLLER
    if controller and not template_changed(request):
        return Validation(Decision())
    try:
        if controller:
            obj, review = pod_of(request, config)
            input_json = orjson.dumps(review).decode()
        result = engine.evaluate(input_json)
    except Exception as exc:  # noqa: BLE001 - any engine failure is answered per the failure mode
        reason = str(exc) if isinstance(exc, EvaluationError) else f"{type(exc).__name__}: {exc}"
        return _failed(request, reason, engine.revision, config.server["failureMode"])
    if controller:
        result = named_for_controller(result, request)
    outcomes = enforce(result, config, list(exceptions), namespace=request.namespace, name=request.name,
                       labels=labels_of(obj), now=now or datetime.now(timezone.utc))
    return Validation(_decide(request, outcomes, engine.revision), outcomes, result)


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
