"""The gateway configuration as the rest of vgate reads it: a complete, validated document.

Read, validated and completed (every ``default`` of the schema filled in) by ``files.config_file``;
the core only reads it, so it never carries fallbacks of its own. Policies see the whole document
as ``data.vgate.config``; Python reads the sections that steer the gateway itself (``server``,
``audit``, ``reports``, ``exceptions``) as the typed settings below, each built here, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, TypeVar

T = TypeVar("T")


def _key(name: str) -> str:
    """A field's key in the config document: snake_case -> camelCase."""
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _typed(cls: type[T], section: dict[str, Any]) -> T:
    """``cls`` from a completed config section (every key present: the schema's defaults filled in)."""
    return cls(**{f.name: section[f.metadata.get("key", _key(f.name))] for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class ServerSettings:
    """``server``: the HTTP server's limits, and how a failed evaluation is answered."""

    max_body_bytes: int
    max_json_depth: int
    max_containers_per_pod: int
    max_tasks_per_job: int
    body_read_timeout_seconds: float
    header_read_timeout_seconds: float
    max_connections_per_worker: int
    client_ca: str | None = field(metadata={"key": "clientCA"})
    evaluation_timeout_seconds: float
    policy_load_timeout_seconds: float
    failure_mode: str


@dataclass(frozen=True)
class AuditSettings:
    """``audit``: where decisions are recorded, and what happens when recording fails."""

    dir: str
    failure_mode: str
    unready_after_failures: int
    mirror_to_stdout: bool


@dataclass(frozen=True)
class PolicyReportSettings:
    """``reports.policyReports``: whether the newest hour's policy reports are put into the cluster."""

    apply: bool
    kubeconfig: str | None


@dataclass(frozen=True)
class ReportSettings:
    """``reports``: where the signed hourly reports, their key and the anchor live."""

    dir: str
    key: str
    language: str
    anchor_file: str | None
    policy_reports: PolicyReportSettings
    retention_days: int


@dataclass(frozen=True)
class ClusterSettings:
    """``cluster``: whether vgate watches the cluster, and how it reaches the API server."""

    watch: bool
    kubeconfig: str | None
    watch_seconds: int


@dataclass(frozen=True)
class ExceptionSettings:
    """``exceptions``: where policy exceptions are read from, and what they may be."""

    dir: str
    allow_cluster_wide: bool
    max_lifetime_days: int

QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")


@dataclass(frozen=True)
class QueueDefinition:
    """One Volcano queue the gateway may assign, and who may use it."""

    name: str
    priority_class: str | None
    qos_class: str | None
    namespaces: tuple[str, ...]


@dataclass(frozen=True)
class Config:
    """The validated configuration. ``document`` is the complete dict policies see as data."""

    source: str
    document: dict[str, Any]

    @cached_property
    def server(self) -> ServerSettings:
        return _typed(ServerSettings, self.document["server"])

    @cached_property
    def audit(self) -> AuditSettings:
        return _typed(AuditSettings, self.document["audit"])

    @cached_property
    def reports(self) -> ReportSettings:
        section = self.document["reports"]
        return _typed(ReportSettings, {**section, "policyReports": _typed(PolicyReportSettings,
                                                                            section["policyReports"])})

    @cached_property
    def cluster(self) -> ClusterSettings:
        return _typed(ClusterSettings, self.document["cluster"])

    @cached_property
    def exceptions(self) -> ExceptionSettings:
        return _typed(ExceptionSettings, self.document["exceptions"])

    @property
    def volcano(self) -> dict[str, Any]:
        return self.document["volcano"]

    @property
    def queues(self) -> dict[str, Any]:
        return self.document["queues"]

    @property
    def qos(self) -> dict[str, Any]:
        return self.document["qos"]

    @property
    def placement(self) -> dict[str, Any]:
        return self.document["placement"]

    @property
    def priority_values(self) -> dict[str, int]:
        return self.document["priorityClasses"]["values"]

    @property
    def global_default_priority_class(self) -> str:
        return self.document["priorityClasses"]["globalDefault"]

    def queue(self, name: str) -> QueueDefinition | None:
        spec = self.queues["definitions"].get(name)
        if spec is None:
            return None
        return QueueDefinition(name, spec.get("priorityClass"), spec.get("qosClass"), tuple(spec["namespaces"]))
