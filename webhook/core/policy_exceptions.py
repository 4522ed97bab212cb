"""Policy exceptions: approved, time-boxed exemptions of matching workloads from named rules.

One or more ``PolicyException`` documents per YAML file in the exceptions directory, validated
by ``exception.schema.json``. A malformed file is rejected with its path and reason and the
others keep working; an expired exception simply no longer applies.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .errors import SourceError
from .namespace_globs import matches_every_namespace
from .workloads import matches_globs


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    """Built on first use, not at import."""
    return jsonschema.Draft202012Validator(
        json.loads((resources.files("webhook.core") / "exception.schema.json").read_text()))


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
    def of(cls, settings: dict[str, Any], now: datetime) -> ExceptionRules:
        return cls(now, settings["allowClusterWide"], settings["maxLifetimeDays"])


def load_configured_exceptions(settings: dict[str, Any], now: datetime) -> tuple[list[PolicyException],
                                                                                  list[SourceError]]:
    """The exceptions the config's ``exceptions`` section points at, under its rules: what the
    server enforces and `vgate eval` must apply alike."""
    return load_exceptions(settings["dir"], ExceptionRules.of(settings, now))


def load_exceptions(directory: str | Path, rules: ExceptionRules) -> tuple[list[PolicyException], list[SourceError]]:
    """Every valid exception under ``directory``, and one error per file rejected."""
    directory = Path(directory)
    if not directory.is_dir():
        return [], []
    exceptions: list[PolicyException] = []
    errors: list[SourceError] = []
    for path in sorted(directory.rglob("*.y*ml")):
        try:
            exceptions += _parse_file(path, rules)
        except SourceError as error:
            errors.append(error)
    return exceptions, errors


def _parse_file(path: Path, rules: ExceptionRules) -> list[PolicyException]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SourceError(str(path), mark.line + 1 if mark else None, f"cannot read exception: {exc}") from exc
    parsed = []
    for index, document in enumerate(documents):
        error = jsonschema.exceptions.best_match(_validator().iter_errors(document))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
            raise SourceError(str(path), None, f"document {index}: {where}: {error.message}")
        spec = document["spec"]
        try:
            expires = datetime.fromisoformat(spec["expiresAt"].replace("Z", "+00:00"))
        except ValueError:
            raise SourceError(str(path), None, f"document {index}: spec/expiresAt: not an RFC 3339 time") from None
        if expires.tzinfo is None:
            raise SourceError(str(path), None, f"document {index}: spec/expiresAt: needs a time zone (e.g. Z)")
        if expires - rules.now > timedelta(days=rules.max_lifetime_days):
            raise SourceError(str(path), None, f"document {index}: spec/expiresAt: {spec['expiresAt']} is more than "
                              f"{rules.max_lifetime_days} days away (exceptions.maxLifetimeDays): exceptions are "
                              "time-boxed; renew it closer to its end")
        match: dict[str, Any] = spec["match"]
        everywhere = [glob for glob in match["namespaces"] if matches_every_namespace(glob)]
        if everywhere and not rules.allow_cluster_wide:
            raise SourceError(str(path), None, f"document {index}: spec/match/namespaces: {everywhere[0]} would "
                              "except every namespace; name them, or set exceptions.allowClusterWide")
        parsed.append(PolicyException(
            name=document["metadata"]["name"], source=str(path), rules=frozenset(spec["rules"]),
            namespaces=tuple(match.get("namespaces", ())), names=tuple(match.get("names", ())),
            labels=tuple(sorted(match.get("labels", {}).items())), justification=spec["justification"],
            approver=spec["approver"], ticket=spec["ticket"], expires_at=expires.astimezone(timezone.utc)))
    return parsed
