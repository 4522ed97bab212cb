"""The decision contract: what the core asks of a policy engine, and what it accepts back.

Every rule package ``vgate.rules.<name>`` yields ``deny`` and ``warn`` sets of objects
``{"rule": <id>, "msg": <text>}`` (and ``"level"`` for a Pod Security Standards check);
``policies/lib/main.rego`` gathers them into ``data.vgate.main.result = {"deny": [...], "warn":
[...]}`` (docs/policy-authors.md, "Writing policies").
An engine is one small interface (as httpx's transports are): it takes the decoded request, its
raw bytes for engines that parse JSON themselves (regorus) and the parsed document for those
that send objects (OPA), and answers with the result and which engine answered. The core calls
it; the server counts and logs what it says. Implementations live in ``webhook.policy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from .errors import EvaluationError

ENTRY_RULE = "data.vgate.main.result"  # what OPA serves: policies/lib/main.rego


PSS_LEVELS = ("baseline", "restricted")


@dataclass(frozen=True)
class Violation:
    """One rule result: which rule, what it found and how to fix it.

    ``level``: a Pod Security Standards check's result says at which level it fails (baseline or
    restricted); the namespace's ``podSecurity`` modes then decide its action (``enforcement``).
    """

    rule: str
    message: str
    level: str | None = None


@dataclass(frozen=True)
class PolicyResult:
    deny: tuple[Violation, ...]
    warn: tuple[Violation, ...]


@dataclass(frozen=True)
class EngineInput:
    """One AdmissionReview to evaluate, as bytes and as the object they parse to (parsed once)."""

    raw: bytes
    document: dict[str, Any]

    @classmethod
    def of(cls, review: dict[str, Any]) -> EngineInput:
        return cls(orjson.dumps(review), review)


@dataclass(frozen=True)
class Evaluation:
    """What an engine answered, and which engine it was: ``rvm``, ``interpreter`` or ``opa``."""

    result: PolicyResult
    engine: str
    fallback: str | None = None  # why the RVM did not answer, when the interpreter did


# Where an engine takes the cluster state policies read as data.inventory: (version, inventory); a
# new version is given to the policies before the next evaluation (cluster.state.ClusterState's).
Inventory = Callable[[], tuple[int, dict[str, Any]]]


class PolicyEngine(Protocol):
    """What the core needs from any engine, in process or remote."""

    revision: str
    name: str  # the engine that serves the policy set: "rvm", "interpreter" or "opa"

    def evaluate(self, request: EngineInput) -> Evaluation:
        """Evaluate the decision rule for one AdmissionReview; EvaluationError if it cannot."""
        ...


def parse_result(result: Any) -> PolicyResult:
    """Check the decision contract; a policy that breaks it is an evaluation error."""
    if not isinstance(result, dict):
        raise EvaluationError(f"{ENTRY_RULE} must be an object with deny and warn, got {type(result).__name__}")
    return PolicyResult(_violations(result, "deny"), _violations(result, "warn"))


def _violations(result: dict[str, Any], key: str) -> tuple[Violation, ...]:
    items = result.get(key, [])
    if not isinstance(items, list):
        raise EvaluationError(f"{ENTRY_RULE}.{key} must be a set of objects")
    violations = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("rule"), str) or not isinstance(item.get("msg"), str):
            raise EvaluationError(f"{ENTRY_RULE}.{key} holds {item!r}: each result needs string fields rule and msg")
        level = item.get("level")
        if level is not None and level not in PSS_LEVELS:
            raise EvaluationError(f"{ENTRY_RULE}.{key} holds {item!r}: level must be one of {', '.join(PSS_LEVELS)}")
        violations.append(Violation(item["rule"], item["msg"], level))
    return tuple(sorted(set(violations), key=lambda v: (v.rule, v.message)))
