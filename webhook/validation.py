"""/validate: turn the policy result for one request into an admission decision.

Pure: the request and an engine in, a Decision out. Unknown kinds never reach the engine.
When the engine fails, the configured failure mode decides (default deny, with the reason),
so a broken policy never silently admits what it was meant to stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .admission import AdmissionRequest, Decision
from .engine import PolicyEngine, PolicyResult
from .errors import EvaluationError
from .workloads import classify


@dataclass
class Validation:
    """The decision and the rule results behind it (for metrics and the audit trail)."""

    decision: Decision
    result: PolicyResult = field(default_factory=lambda: PolicyResult((), ()))
    error: str | None = None
    evaluated: bool = False


def validate(request: AdmissionRequest, input_json: str, engine: PolicyEngine, failure_mode: str) -> Validation:
    """Evaluate the policies on one request (given as the AdmissionReview's JSON text)."""
    if classify(request) is None:
        return Validation(Decision())
    try:
        result = engine.evaluate(input_json)
    except Exception as exc:  # noqa: BLE001 - any engine failure is answered per the failure mode
        reason = str(exc) if isinstance(exc, EvaluationError) else f"{type(exc).__name__}: {exc}"
        return _failed(request, reason, engine.revision, failure_mode)
    return Validation(_decide(request, result, engine.revision), result, evaluated=True)


def _decide(request: AdmissionRequest, result: PolicyResult, revision: str) -> Decision:
    annotations = {"policy-revision": revision}
    decision = Decision(audit_annotations=annotations)
    if result.warn:
        decision.warnings = [f"[{v.rule}] {v.message}" for v in result.warn]
        annotations["warned-rules"] = ",".join(sorted({v.rule for v in result.warn}))
    if result.deny:
        rules = sorted({v.rule for v in result.deny})
        annotations["denied-rules"] = ",".join(rules)
        reasons = "; ".join(f"[{v.rule}] {v.message}" for v in result.deny)
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
