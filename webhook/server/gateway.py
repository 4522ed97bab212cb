"""The request path around the pure decision code: decode, decide, record, count.

The HTTP layer hands a body to ``Gateway.mutate``/``Gateway.validate`` and serialises what comes
back; mutation and validation know nothing of I/O. Every outcome, refusals included, is
written to the decision log and counted before the answer leaves.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from ..audit.log import DecisionLog
from ..cluster.state import ClusterState
from ..core.admission import AdmissionRequest, Decision, decode_review, encode_response
from ..core.config import Config
from ..core.contract import EngineInput, Evaluation, PolicyEngine
from ..core.errors import AuditError, RequestError
from ..core.kind_handler import NO_CLUSTER, ClusterView, KindContext
from ..core.kinds import HANDLED_KINDS, AdmissionKind, PodSubresource, context_of, entry_of
from ..core.mutation import mutate
from ..core.patching import Mutation
from ..core.policy_exceptions import PolicyException
from ..core.steps import Record, Steps, T, run, run_async
from ..core.validation import Validation, validation_steps
from ..policy.isolated import IsolatedEngine
from .metrics import Metrics

log = logging.getLogger("vgate")
# Runs ``call(*args)`` where it may block (an app thread) and awaits its result.
Offload = Callable[..., Awaitable[Any]]


@dataclass
class Gateway:
    """Config, engine, decision log and metrics of one worker process (built by ``wiring``)."""

    config: Config
    engine: PolicyEngine
    decisions: DecisionLog | None
    exceptions: list[PolicyException] = field(default_factory=list)
    policy_dir: Path = Path("policies")
    metrics: Metrics = field(default_factory=Metrics)
    cluster: ClusterState | None = None  # with cluster.watch: the worker's watched cluster state

    def sources(self) -> list[Path]:
        """What this gateway was built from: a change to any of them calls for a reload."""
        return [Path(self.config.source), self.policy_dir, Path(self.config.exceptions.dir)]

    @property
    def revision(self) -> str:
        return self.engine.revision

    def mutate(self, body: bytes) -> dict[str, Any]:
        """Answer /mutate on this thread."""
        return self._run(self.mutate_steps(body))

    def validate(self, body: bytes) -> dict[str, Any]:
        """Answer /validate on this thread."""
        return self._run(self.validate_steps(body))

    def refuse(self, endpoint: str, error: RequestError, started: float | None = None) -> None:
        """Record and count, on this thread, a request refused before any decision (HTTP 400/408/413)."""
        self._run(self.refuse_steps(endpoint, error, started))

    async def answer_async(self, endpoint: str, body: bytes, offload: Offload) -> dict[str, Any]:
        """Answer /mutate or /validate on the running event loop: the evaluator child's answer and the
        record's sync are awaited, not waited for by a thread. What must block (OPA over HTTP, a child to
        start) is handed to ``offload``, which runs a call on an app thread."""
        steps = self.mutate_steps(body) if endpoint == "mutate" else self.validate_steps(body)
        engine = self.engine

        async def evaluate(request: EngineInput) -> Evaluation:
            if isinstance(engine, IsolatedEngine):
                return await engine.evaluate_async(request, offload)
            return await offload(engine.evaluate, request)

        async def record(entry: dict[str, Any]) -> None:
            assert self.decisions is not None  # a Record is yielded only with a decision log
            await self.decisions.record_async(entry)

        return await run_async(steps, evaluate, record)

    def _run(self, steps: Steps[T]) -> T:
        """``steps`` on this thread: the engine asked and each record written by blocking calls."""
        def record(entry: dict[str, Any]) -> None:
            assert self.decisions is not None  # a Record is yielded only with a decision log
            self.decisions.record(entry)

        return run(steps, self.engine.evaluate, record)

    def mutate_steps(self, body: bytes) -> Steps[dict[str, Any]]:
        """Answer /mutate. Anything unexpected allows the object unpatched (mutation is best effort)."""
        started = time.perf_counter()
        request = yield from self._decode("mutate", body, started)
        error = None
        entry, context = self._context(request)
        try:
            mutation = mutate(request, self.config, context)
        except Exception as exc:  # a mutation bug must not block admission
            log.exception("mutation failed for %s %s", request.kind, request.uid)
            self.metrics.errors.labels("mutate", "mutation").inc()
            mutation, error = Mutation(), f"mutation failed: {exc}"
        decision = Decision(patch=mutation.patch, warnings=mutation.warnings if mutation.patch else [])
        outcome = "error" if error else "mutated" if mutation.patch else "allowed"
        recorded = yield from self._finish("mutate", request, decision, outcome, started, error=error,
                                           patch=mutation.paths, queue=mutation.queue,
                                           queueSource=mutation.queue_source, qosClasses=mutation.qos_classes,
                                           **self._recorded(entry, request, context))
        answer = encode_response(request, decision if recorded else self._unrecorded(decision))
        if "patch" in answer["response"]:
            self.metrics.patch_bytes.inc(len(answer["response"]["patch"]))
        return answer

    @property
    def view(self) -> ClusterView:
        """The cluster as kinds read it: the watched state, or none without cluster.watch."""
        return self.cluster if self.cluster is not None else NO_CLUSTER

    def _context(self, request: AdmissionRequest) -> tuple[AdmissionKind | PodSubresource | None, KindContext]:
        """The request's registry entry and what its handler reads of the cluster, once per request.
        An object the API server would never send (metadata not an object) gets no context, and a
        binding then cannot be judged: answered per server.failureMode."""
        entry = entry_of(request)
        try:
            return entry, context_of(request, self.view, self.config)
        except Exception as exc:  # noqa: BLE001 - a malformed object must not stop the answer
            log.warning("no cluster context for %s %s: %s: %s", request.kind, request.uid, type(exc).__name__, exc)
            return entry, KindContext(binding=f"its cluster context could not be read ({type(exc).__name__})")

    def _recorded(self, entry: AdmissionKind | PodSubresource | None, request: AdmissionRequest,
                  context: KindContext) -> dict[str, Any]:
        return entry.handler.record(request, context, self.config) if entry is not None else {}

    def cluster_status(self) -> dict[str, dict[str, Any]] | None:
        """The cluster state's freshness per kind (and its metrics set from it); None without cluster.watch."""
        if self.cluster is None:
            return None
        status = self.cluster.freshness(time.monotonic())
        for kind, state in status.items():
            self.metrics.cluster_synced.labels(kind).set(1 if state["synced"] else 0)
            self.metrics.cluster_objects.labels(kind).set(state["objects"])
            if state["contactAgeSeconds"] is not None:
                self.metrics.cluster_age.labels(kind).set(state["contactAgeSeconds"])
        return status

    def _unrecorded(self, decision: Decision) -> Decision:
        """The answer to a decision the log could not take: refused under audit.failureMode deny."""
        if self.config.audit.failure_mode != "deny":
            return decision
        return Decision(allowed=False, code=500, audit_annotations={"audit-error": "decision log unavailable"},
                        message="vgate could not record this decision in its decision log, and nothing is admitted "
                                "unrecorded (audit.failureMode deny): see the vgate log")

    def validate_steps(self, body: bytes) -> Steps[dict[str, Any]]:
        """Answer /validate; evaluation failures follow ``server.failureMode``."""
        started = time.perf_counter()
        request = yield from self._decode("validate", body, started)
        entry, context = self._context(request)
        result = yield from validation_steps(request, self.revision, self.config, self.exceptions,
                                             now=datetime.now(timezone.utc), context=context)
        if result.engine:
            self.metrics.evaluations.labels(result.engine).inc()
        if result.fallback:
            log.debug("the interpreter answered %s %s: %s", request.kind, request.uid, result.fallback)
        if result.error:
            log.error("policy evaluation failed for %s %s: %s", request.kind, request.uid, result.error)
            self.metrics.errors.labels("validate", "evaluation").inc()
        for outcome in result.outcomes:
            self.metrics.violations.labels(outcome.rule, outcome.action).inc()
        details = {} if result.exempt else self._recorded(entry, request, context)
        if not result.decision.allowed:
            details.pop("drift", None)  # a refused node change moved nothing
        if entry is not None and result.decision.allowed and not result.exempt and not request.dry_run:
            entry.handler.admitted(request, self.view)
        recorded = yield from self._finish("validate", request, result.decision, _outcome(result), started,
                                           error=result.error, exempt=result.exempt, rules=_rule_results(result),
                                           exceptions=self._exceptions_used(result), egress=result.egress, **details)
        return encode_response(request, result.decision if recorded else self._unrecorded(result.decision))

    def _exceptions_used(self, result: Validation) -> list[dict[str, str]]:
        """Each exception a decision used, with its justification, approver, ticket and expiry."""
        used = {o.exception for o in result.outcomes if o.exception}
        return [exception.as_record() for exception in self.exceptions if exception.name in used] if used else []

    def refuse_steps(self, endpoint: str, error: RequestError, started: float | None = None) -> Steps[None]:
        """Record and count a request refused before any decision (HTTP 400/408/413)."""
        self.metrics.errors.labels(endpoint, f"http_{error.status}").inc()
        self.metrics.requests.labels(endpoint, "", "", "error", "false").inc()
        yield from self._write({"endpoint": endpoint, "decision": "error", "httpStatus": error.status,
                                "error": error.message, "policyRevision": self.revision, "latencyMs": _ms(started)})

    def _decode(self, endpoint: str, body: bytes, started: float) -> Steps[AdmissionRequest]:
        self.metrics.request_bytes.labels(endpoint).inc(len(body))
        try:
            return decode_review(body, self.config.server.max_json_depth)
        except RequestError as error:
            yield from self.refuse_steps(endpoint, error, started)
            raise

    def _finish(self, endpoint: str, request: AdmissionRequest, decision: Decision, outcome: str,
                started: float, **details: Any) -> Steps[bool]:
        elapsed = time.perf_counter() - started
        self.metrics.latency.labels(endpoint).observe(elapsed)
        dry_run = str(request.dry_run).lower()
        kind = request.kind if request.kind in KNOWN_KINDS else "other"  # labels from a fixed set: bounded series
        recorded = yield from self._write({
            "endpoint": endpoint, "uid": request.uid, "user": request.user, "groups": list(request.groups),
            "operation": request.operation, "kind": f"{request.api_group_version}/{request.kind}",
            "resource": request.resource, **({"subResource": request.sub_resource} if request.sub_resource else {}),
            "namespace": request.namespace, "name": request.name, "dryRun": request.dry_run,
            "decision": outcome, "allowed": decision.allowed, "message": decision.message or None,
            "policyRevision": self.revision, "latencyMs": round(elapsed * 1000, 3),
            **{k: v for k, v in details.items() if v},
        })
        refused = not recorded and self.config.audit.failure_mode == "deny"
        answered = "error" if refused else outcome  # count what the client got: an unrecorded refusal is an error
        self.metrics.requests.labels(endpoint, kind, request.operation, answered, dry_run).inc()
        for drifted in [] if request.dry_run else details.get("drift") or []:  # an allowed node change
            for change in drifted["changes"]:
                self.metrics.drift.labels(change["what"]).inc()
        return recorded

    def _write(self, entry: dict[str, Any]) -> Steps[bool]:
        """Record one decision durably; False (logged and counted) if it could not be."""
        if self.decisions is None:
            return True
        try:
            yield Record(bounded_record(entry))
        except AuditError as exc:
            log.error("decision log write failed, %s %s is unrecorded: %s", entry["endpoint"], entry.get("uid"), exc)
            self.metrics.errors.labels(entry["endpoint"], "audit").inc()
            self.decisions.failure_balance += 1
            return False
        # a success outweighs one failure, not all: a nearly full volume takes small records into the
        # last page of a segment and refuses the rest, and must not look writable for it
        self.decisions.failure_balance = max(0, self.decisions.failure_balance - 1)
        return True

    def engine_unready(self) -> str | None:
        """Why this replica cannot evaluate policies (an evaluator child that cannot be started); a
        stopped child is replaced on the way (IsolatedEngine.check). None when it can, or when the
        engine runs in this process (nothing to check)."""
        return self.engine.check() if isinstance(self.engine, IsolatedEngine) else None

    def audit_unready(self) -> str | None:
        """Why this replica should take no traffic: its decision log failed more often than it succeeded,
        by the limit, and still takes no write. None when ready (recovering by itself once the volume is back)."""
        limit = self.config.audit.unready_after_failures
        if self.decisions is None:
            return None
        stalled = self.decisions.stalled_seconds()
        if stalled > STALLED_COMMIT_SECONDS:
            return f"decision log write in {self.decisions.directory} has not completed for {stalled:.0f}s"
        if self.decisions.failure_balance < limit:
            return None
        reason = self.decisions.unwritable()
        if reason is None:
            self.decisions.failure_balance = 0
            return None
        return (f"decision log unavailable in {self.decisions.directory}: {reason} "
                f"({self.decisions.failure_balance} more writes failed than succeeded)")


# A commit of the decision log running longer than this (a disk that stopped answering) makes the
# replica unready at once: its waiters time out after as long, and the event loop may be the waiter.
STALLED_COMMIT_SECONDS = 10.0
# Every kind /validate or /mutate judges; anything else is counted as "other".
KNOWN_KINDS = frozenset(kind for _, _, kind in HANDLED_KINDS)
FIELD_LIMIT = 2048  # characters of one string the decision log keeps whole


def bounded_record(entry: dict[str, Any]) -> dict[str, Any]:
    """``bounded(entry)``, without its walk when the record's JSON is within FIELD_LIMIT bytes, as
    most are (no string in it can be longer): ~1 µs against ~6 µs for a decision's record."""
    try:
        if len(orjson.dumps(entry)) <= FIELD_LIMIT:
            return entry
    except orjson.JSONEncodeError:
        pass  # walked, and the log says what it cannot write
    result: dict[str, Any] = bounded(entry)
    return result


def bounded(value: Any) -> Any:
    """The record with every string longer than FIELD_LIMIT cut to its start, its size and its sha256:
    a tenant's 3 MiB name or a rule's runaway message cannot make the log grow with the request."""
    if isinstance(value, str) and len(value) > FIELD_LIMIT:
        data = value.encode("utf-8", "replace")
        return f"{value[:512]}... [{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}]"
    if isinstance(value, list):
        return [bounded(item) for item in value]
    if isinstance(value, dict):
        return {key: bounded(item) for key, item in value.items()}
    return value


def _outcome(result: Validation) -> str:
    if result.error:
        return "error"
    if not result.decision.allowed:
        return "denied"
    return "warned" if result.rules("warn") else "allowed"


def _rule_results(result: Validation) -> list[dict[str, Any]]:
    return [{"id": o.rule, "action": o.action, "message": o.message,
             **({"exception": o.exception} if o.exception else {})}
            for o in result.outcomes]


def _ms(started: float | None) -> float | None:
    return round((time.perf_counter() - started) * 1000, 3) if started is not None else None
