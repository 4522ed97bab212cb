"""PolicyException files: one or more documents per YAML file in the exceptions directory,
validated by ``exception.schema.json``. A malformed file is rejected with its path and reason and
the others keep working.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..core.config import ExceptionSettings
from ..core.errors import SourceError
from ..core.namespace_globs import matches_every_namespace
from ..core.policy_exceptions import ExceptionRules, PolicyException
from .yaml_problems import yaml_problem


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    """Built on first use, not at import."""
    return jsonschema.Draft202012Validator(
        json.loads((resources.files("webhook.files") / "exception.schema.json").read_text()))


def load_configured_exceptions(settings: ExceptionSettings, now: datetime) -> tuple[list[PolicyException],
                                                                                  list[SourceError]]:
    """The exceptions the config's ``exceptions`` section points at, under its rules: what the
    server enforces and `vgate eval` must apply alike."""
    return load_exceptions(settings.dir, ExceptionRules.of(settings, now))


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
    if rules.allow_cluster_wide:
        return exceptions, errors
    together = _cluster_wide_together(exceptions)
    errors += [SourceError(e.source, None, f"{e.name}: {together[e.name]}") for e in exceptions if e.name in together]
    return [e for e in exceptions if e.name not in together], errors


def _cluster_wide_together(exceptions: list[PolicyException]) -> dict[str, str]:
    """The exceptions that, with others of the same rule, except it in every namespace, and why: each
    is refused, as one exception of all their globs would be (none alone covered every namespace)."""
    refused: dict[str, str] = {}
    for rule in sorted({rule for exception in exceptions for rule in exception.rules}):
        sharing = [e for e in exceptions if rule in e.rules and e.namespaces]
        if len(sharing) > 1 and matches_every_namespace(*(glob for e in sharing for glob in e.namespaces)):
            globs = ", ".join(glob for e in sharing for glob in e.namespaces)
            names = ", ".join(e.name for e in sharing)
            for exception in sharing:
                refused.setdefault(exception.name, f"exceptions {names} together except rule {rule} in every "
                                                   f"namespace ({globs}); name the namespaces, or set "
                                                   "exceptions.allowClusterWide")
    return refused


def _parse_file(path: Path, rules: ExceptionRules) -> list[PolicyException]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise SourceError(str(path), None, f"cannot read exception: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise SourceError(str(path), *yaml_problem(exc)) from exc
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
        if matches_every_namespace(*match["namespaces"]) and not rules.allow_cluster_wide:
            globs = ", ".join(match["namespaces"])
            raise SourceError(str(path), None, f"document {index}: spec/match/namespaces: {globs} would "
                              "except every namespace; name them, or set exceptions.allowClusterWide")
        parsed.append(PolicyException(
            name=document["metadata"]["name"], source=str(path), rules=frozenset(spec["rules"]),
            namespaces=tuple(match.get("namespaces", ())), names=tuple(match.get("names", ())),
            labels=tuple(sorted(match.get("labels", {}).items())), justification=spec["justification"],
            approver=spec["approver"], ticket=spec["ticket"], expires_at=expires.astimezone(timezone.utc)))
    return parsed
