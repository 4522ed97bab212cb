"""/validate: turn the policy result for one request into an admission decision.

Pure: the request, an engine, the config, the exceptions in force and the time in; a Validation
out. Unknown kinds and exempt namespaces never reach the engine. When the engine fails, the
configured failure mode decides (default deny, with the reason), so a broken policy never
silently admits what it was meant to stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .admission import AdmissionRequest, Decision
from .config import Config
from .contract import Evaluation, PolicyEngine, PolicyResult
from .egress_judge import egress_facts
from .enforcement import Outcome, enforce
from .errors import EvaluationError, SparkSpecError
from .kind_handler import NO_CONTEXT, KindContext, with_input
from .kinds import HANDLED_KINDS, entry_of
from .pod_templates import named_for
from .policy_exceptions import PolicyException
from .size_limits import oversize
from .steps import Steps, run
from .workloads import is_exempt, labels_of


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
    egress: dict[str, Any] | None = None  # what the write does to sensitive pods' egress (``input.egress``)

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
    return Validation(Decision(allowed=False, code=403, message=f"vgate denied {request.kind} "
                               f"{request.qualified_name}: {reason}",
                               audit_annotations={"refused": "unknown-subresource"}), error=reason)


def validate(request: AdmissionRequest, engine: PolicyEngine, config: Config, exceptions: Sequence[PolicyException],
             now: datetime, context: KindContext = NO_CONTEXT) -> Validation:
    """``validation_steps`` with ``engine`` asked on this thread."""
    return run(validation_steps(request, engine.revision, config, exceptions, now, context), engine.evaluate,
               _records_nothing)


def _records_nothing(entry: dict[str, Any]) -> None:
    raise AssertionError("validation records nothing itself")


def validation_steps(request: AdmissionRequest, revision: str, config: Config, exceptions: Sequence[PolicyException],
                     now: datetime, context: KindContext = NO_CONTEXT) -> Steps[Validation]:
    """Evaluate the policies on one request and decide, as its registry entry's handler says: each
    judged object is yielded to be evaluated (``steps``), and an engine's failure thrown in.

    ``context`` is what the handler's ``context`` read of the cluster for it (a namespace's queue,
    a binding's pod and node, the labels a Spark executor inherits). A pod controller is evaluated
    as the pod its template will create, a Spark application as its driver and executor pods, a
    Binding with ``input.binding`` (``handlers``). What cannot be judged now (a binding the
    cluster state cannot tell) is answered per server.failureMode like an evaluation that failed:
    never allowed unjudged.
    """
    entry = entry_of(request)
    if entry is None:
        return _unjudged(request, config)
    if is_exempt(request.namespace, config):
        return Validation(Decision(), exempt=True)
    handler = entry.handler
    too_large = oversize(handler, request.object, config)
    if too_large:
        message = f"vgate denied {request.kind} {request.qualified_name}: {too_large}"
        return Validation(Decision(allowed=False, code=403, message=message,
                                   audit_annotations={"refused": "too-large"}), error=None)
    if not handler.new_pods(request):
        return Validation(Decision())  # scaling, labels, status: no new pods
    try:
        judged = handler.judged(request, config, context)
        pods = [item.obj for item in judged] if handler.judges_pods else []
        egress = egress_facts(request, pods, context.network, config.placement)
        if egress is not None:  # judged once per request: with its first judged object
            judged[0] = with_input(judged[0], "egress", egress)
        answers: list[tuple[str | None, Evaluation]] = []
        for item in judged:
            answers.append((item.title, (yield item.evaluated)))
    except SparkSpecError as refusal:  # its pods cannot be told, or it runs more executors than judged
        return Validation(Decision(allowed=False, code=403, message=f"vgate denied {request.kind} "
                                   f"{request.qualified_name}: {refusal}", audit_annotations={"refused": "spark-spec"}),
                          error=None)
    except Exception as exc:  # noqa: BLE001 - any engine failure is answered per the failure mode
        reason = str(exc) if isinstance(exc, EvaluationError) else f"{type(exc).__name__}: {exc}"
        return _failed(request, reason, revision, config.server.failure_mode)
    results = [named_for(answer.result, title) if title else answer.result for title, answer in answers]
    result = PolicyResult(tuple(v for r in results for v in r.deny), tuple(v for r in results for v in r.warn))
    outcomes = enforce(result, config, list(exceptions), namespace=request.namespace, name=request.name,
                       labels=labels_of(judged[0].obj), now=now)
    decision = _decide(request, outcomes, revision)
    decision.warnings += handler.warnings(request)
    return Validation(decision, outcomes, result, engine=answers[0][1].engine, fallback=answers[0][1].fallback,
                      egress=egress)


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
        decision.message = f"vgate denied {request.kind} {request.qualified_name}: {reasons}"
    return decision


def _failed(request: AdmissionRequest, reason: str, revision: str, failure_mode: str) -> Validation:
    annotations = {"policy-revision": revision, "evaluation-error": reason[:200]}
    if failure_mode == "allow":
        decision = Decision(warnings=[f"vgate could not evaluate policies ({reason}); admitted by failure mode allow"],
                            audit_annotations=annotations)
    else:
        decision = Decision(allowed=False, code=500, audit_annotations=annotations,
                            message=f"vgate could not evaluate policies for {request.kind} "
                                    f"{request.qualified_name}: {reason}; failure mode is deny, so the request is "
                                    "refused")
    return Validation(decision, error=reason)
