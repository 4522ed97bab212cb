"""Policy exceptions: approved, time-boxed exemptions of matching workloads from named rules.

What an exception is and when it applies; reading and checking the files is
``files.exception_files``. An expired exception simply no longer applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .config import ExceptionSettings
from .workloads import matches_globs


@dataclass(frozen=True)
class PolicyException:
    name: str
    source: str
    rules: frozenset[str]
    namespaces: tuple[str, ...]
    names: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]
    justification: str
    approver: str
    ticket: str
    expires_at: datetime

    def as_record(self) -> dict[str, str]:
        """What a decision that used this exception records of it, for auditors."""
        return {"name": self.name, "justification": self.justification, "approver": self.approver,
                "ticket": self.ticket, "expiresAt": self.expires_at.isoformat()}

    def covers(self, rule: str, namespace: str, name: str, labels: dict[str, str], now: datetime) -> bool:
        """Whether this exception exempts ``rule`` for the object, at time ``now``."""
        return (now < self.expires_at and rule in self.rules
                and (not self.namespaces or matches_globs(namespace, self.namespaces))
                and (not self.names or matches_globs(name, self.names))
                and all(labels.get(key) == value for key, value in self.labels))


@dataclass(frozen=True)
class ExceptionRules:
    """What the config allows of an exception (``exceptions.allowClusterWide``, ``maxLifetimeDays``),
    and the time of loading, against which its lifetime is measured."""

    now: datetime
    allow_cluster_wide: bool = False
    max_lifetime_days: int = 90

    @classmethod
    def of(cls, settings: ExceptionSettings, now: datetime) -> ExceptionRules:
        return cls(now, settings.allow_cluster_wide, settings.max_lifetime_days)
