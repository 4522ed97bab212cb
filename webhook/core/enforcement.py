"""From rule results to actions: enforcement per rule and namespace, and exceptions.

Rules say what is wrong; operators say what it costs. A ``deny`` result becomes ``deny``
(refused), ``warn`` (admission warning) or ``audit`` (recorded only) by the config's
``enforcement`` (namespace override, then the rule's action, then the default); a ``warn`` result
is always a warning. A current exception that covers the rule and object turns either into
``excepted``, recorded with the exception's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .config import Config
from .contract import PolicyResult
from .policy_exceptions import PolicyException
from .workloads import matches_globs


@dataclass(frozen=True)
class Outcome:
    rule: str
    message: str
    action: str  # deny | warn | audit | excepted
    exception: str | None = None


def action_for(rule: str, namespace: str, enforcement: dict[str, Any]) -> str:
    """The configured action of a deny result of ``rule`` in ``namespace``."""
    for override in enforcement["namespaces"]:
        if matches_globs(namespace, override["namespaces"]):
            actions = override["rules"]
            if rule in actions or "*" in actions:
                return actions.get(rule, actions.get("*"))
    return enforcement["rules"].get(rule, enforcement["default"])


def enforce(result: PolicyResult, config: Config, exceptions: list[PolicyException], *, namespace: str,
            name: str, labels: dict[str, str], now: datetime) -> list[Outcome]:
    """One outcome per rule result, in the order deny results then warn results."""
    outcomes = []
    for kind, violations in (("deny", result.deny), ("warn", result.warn)):
        for violation in violations:
            exception = next((e for e in exceptions if e.covers(violation.rule, namespace, name, labels, now)), None)
            if exception is not None:
                outcomes.append(Outcome(violation.rule, violation.message, "excepted", exception.name))
            elif kind == "warn":
                outcomes.append(Outcome(violation.rule, violation.message, "warn"))
            else:
                outcomes.append(Outcome(violation.rule, violation.message,
                                        action_for(violation.rule, namespace, config.document["enforcement"])))
    return outcomes
