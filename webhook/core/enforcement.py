"""From rule results to actions: enforcement per rule and namespace, and exceptions.

Rules say what is wrong; operators say what it costs. A ``deny`` result becomes ``deny``
(refused), ``warn`` (admission warning) or ``audit`` (recorded only) by the config's
``enforcement`` (namespace override, then the rule's action, then the default); a ``warn`` result
is always a warning. A Pod Security Standards result carries the level it fails at: without an
explicit namespace override or rule action, the namespace's ``podSecurity`` modes decide, as
pod-security admission's labels do (enforce covers it: deny; else warn: warn; else audit: audit;
else nothing, and it is dropped). A current exception that covers the rule and object turns
any of them into ``excepted``, recorded with the exception's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .config import Config, EnforcementSettings, PodSecuritySettings
from .contract import PolicyResult, Violation
from .policy_exceptions import PolicyException
from .workloads import matches_globs


@dataclass(frozen=True)
class Outcome:
    rule: str
    message: str
    action: str  # deny | warn | audit | excepted
    exception: str | None = None


_LEVEL_RANK = {"privileged": 0, "baseline": 1, "restricted": 2}
_MODE_ACTIONS = (("enforce", "deny"), ("warn", "warn"), ("audit", "audit"))


def action_for(rule: str, namespace: str, enforcement: EnforcementSettings) -> str:
    """The configured action of a deny result of ``rule`` in ``namespace``."""
    return _explicit_action(rule, namespace, enforcement) or enforcement.default


def _explicit_action(rule: str, namespace: str, enforcement: EnforcementSettings) -> str | None:
    for override in enforcement.namespaces:
        if matches_globs(namespace, override.namespaces):
            actions = override.rules
            if rule in actions or "*" in actions:
                return str(actions.get(rule, actions.get("*")))
    action = enforcement.rules.get(rule)
    return str(action) if action else None


def pod_security_modes(namespace: str, pod_security: PodSecuritySettings) -> dict[str, str]:
    """The namespace's enforce, warn, audit levels and version: its first matching entry over the top level."""
    modes = dict(pod_security.modes)
    for entry in pod_security.namespaces:
        if matches_globs(namespace, entry.namespaces):
            modes.update(entry.modes)
            break
    return modes


def level_action(level: str, namespace: str, pod_security: PodSecuritySettings) -> str | None:
    """What a Pod Security Standards result failing at ``level`` does in ``namespace`` (None: nothing)."""
    modes = pod_security_modes(namespace, pod_security)
    for mode, action in _MODE_ACTIONS:
        if _LEVEL_RANK[modes[mode]] >= _LEVEL_RANK[level]:
            return action
    return None


def enforce(result: PolicyResult, config: Config, exceptions: list[PolicyException], *, namespace: str,
            name: str, labels: dict[str, str], now: datetime) -> list[Outcome]:
    """One outcome per rule result (none for a level no mode covers), deny results then warn results."""
    outcomes = []
    for kind, violations in (("deny", result.deny), ("warn", result.warn)):
        for violation in violations:
            action = "warn" if kind == "warn" else _action(violation, namespace, config)
            if action is None:
                continue
            exception = next((e for e in exceptions if e.covers(violation.rule, namespace, name, labels, now)), None)
            if exception is not None:
                outcomes.append(Outcome(violation.rule, violation.message, "excepted", exception.name))
            else:
                outcomes.append(Outcome(violation.rule, violation.message, action))
    return outcomes


def _action(violation: Violation, namespace: str, config: Config) -> str | None:
    if violation.level is None:
        return action_for(violation.rule, namespace, config.enforcement)
    return (_explicit_action(violation.rule, namespace, config.enforcement)
            or level_action(violation.level, namespace, config.pod_security))
