"""The gateway configuration as the rest of vgate reads it: a complete, validated document.

Read, validated and completed (every ``default`` of the schema filled in) by ``files.config_file``;
the core only reads it, so it never carries fallbacks of its own. Policies see the whole document
as ``data.vgate.config``; Python reads every section it uses as the typed settings below, each
built here, in one place: no other module reads the document by key.
"""

from __future__ import annotations

from collections.abc import Mapping
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
class ForwardSettings:
    """``audit.forward``: the audit system (a syslog or RELP collector) every decision record goes to."""

    url: str
    ca_file: str | None
    cert_file: str | None
    key_file: str | None
    max_message_bytes: int


@dataclass(frozen=True)
class AuditSettings:
    """``audit``: where decisions are recorded, and what happens when recording fails."""

    dir: str
    failure_mode: str
    unready_after_failures: int
    mirror_to_stdout: bool
    background_interval: str = "1h"  # how often `vgate audit scan --watch` judges what runs
    forward: ForwardSettings = ForwardSettings("", None, None, None, 8192)  # off


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
    snapshot: bool = True  # the state at the hour's close, listed from the cluster by `vgate report`


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
class VolcanoSettings:
    """``volcano``: the scheduler vgate gives workloads, and in which namespaces."""

    scheduler_name: str
    namespaces: tuple[str, ...]
    allowed_schedulers: tuple[str, ...]


@dataclass(frozen=True)
class QueueDefinition:
    """One Volcano queue the gateway may assign, and who may use it."""

    name: str
    priority_class: str | None
    qos_class: str | None
    namespaces: tuple[str, ...]


@dataclass(frozen=True)
class QueueBySelector:
    """``queues.bySelector[]``: workloads whose labels a selector matches go to ``queue``."""

    queue: str
    selector: Mapping[str, Any]  # a metav1.LabelSelector, as written


@dataclass(frozen=True)
class QueueSettings:
    """``queues``: which queue a workload gets (by namespace, then by labels, then the default)."""

    default: str
    by_namespace: Mapping[str, str]
    by_selector: tuple[QueueBySelector, ...]
    definitions: Mapping[str, QueueDefinition]


@dataclass(frozen=True)
class QosSettings:
    """``qos``: whether workloads may ask for a class, and the resources a class is filled in with."""

    honor_annotation: bool
    guaranteed_cpu: str  # qos.cpu.guaranteed.limit
    guaranteed_memory: str  # qos.memory.guaranteed.limit
    burstable_memory_request: str
    burstable_memory_limit: str


@dataclass(frozen=True)
class Label:
    """A label key and the value that means it applies."""

    key: str
    value: str


@dataclass(frozen=True)
class PlacementSettings:
    """``placement``: what marks sensitive work, and the node labels its placement is judged by."""

    sensitive_label: Label
    zone_label: str
    encrypted_node_labels: tuple[str, ...]
    confidential_runtime_classes: tuple[str, ...]
    egress_deny_label: Label
    egress: EgressSettings

    def is_sensitive(self, labels: Mapping[str, str]) -> bool:
        """Whether these labels mark sensitive work (the configured value exactly, case included)."""
        return labels.get(self.sensitive_label.key) == self.sensitive_label.value

    @property
    def classification(self) -> dict[str, str]:
        """The classification labels, each with the value that restricts: sensitive, deny-egress."""
        return {label.key: label.value for label in (self.sensitive_label, self.egress_deny_label)}


@dataclass(frozen=True)
class EgressSettings:
    """``placement.egress``: what counts as inside for a sensitive pod's effective egress."""

    internal_cidrs: tuple[str, ...]  # addresses inside the cluster's boundary; every other is outside
    allowed_peers: tuple[tuple[str, Mapping[str, Any]], ...]  # (namespace, podSelector): reachable, not followed
    pod_cidrs: tuple[str, ...] = ()  # the pod network: an address range reaching it reaches every pod


@dataclass(frozen=True)
class NamespaceEnforcement:
    """``enforcement.namespaces[]``: per-rule actions (``*``: every rule) in matching namespaces."""

    namespaces: tuple[str, ...]
    rules: Mapping[str, str]


@dataclass(frozen=True)
class EnforcementSettings:
    """``enforcement``: what a deny result does (deny, warn, audit), per rule and per namespace."""

    default: str
    rules: Mapping[str, str]
    namespaces: tuple[NamespaceEnforcement, ...]


@dataclass(frozen=True)
class NamespacePodSecurity:
    """``podSecurity.namespaces[]``: the modes it sets (what it leaves out comes from the top level)."""

    namespaces: tuple[str, ...]
    modes: Mapping[str, str]  # of enforce, warn, audit, version: those given


@dataclass(frozen=True)
class PodSecuritySettings:
    """``podSecurity``: as pod-security admission's namespace labels; the first matching entry wins."""

    modes: Mapping[str, str]  # enforce, warn, audit (privileged | baseline | restricted), version
    namespaces: tuple[NamespacePodSecurity, ...]


POD_SECURITY_MODES = ("enforce", "warn", "audit", "version")


@dataclass(frozen=True)
class Config:
    """The validated configuration. ``document`` is the complete dict policies see as data; Python
    reads it only through the typed sections below, each built here from it."""

    source: str
    document: dict[str, Any]

    @cached_property
    def server(self) -> ServerSettings:
        return _typed(ServerSettings, self.document["server"])

    @cached_property
    def audit(self) -> AuditSettings:
        section = self.document["audit"]
        return _typed(AuditSettings, {**section, "forward": _typed(ForwardSettings, section["forward"])})

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

    @cached_property
    def volcano(self) -> VolcanoSettings:
        section = self.document["volcano"]
        return VolcanoSettings(section["schedulerName"], tuple(section["namespaces"]),
                               tuple(section["allowedSchedulers"]))

    @cached_property
    def queues(self) -> QueueSettings:
        section = self.document["queues"]
        definitions = {name: QueueDefinition(name, spec.get("priorityClass"), spec.get("qosClass"),
                                             tuple(spec["namespaces"]))
                       for name, spec in section["definitions"].items()}
        return QueueSettings(section["default"], dict(section["byNamespace"]),
                             tuple(QueueBySelector(rule["queue"], rule["selector"]) for rule in section["bySelector"]),
                             definitions)

    @cached_property
    def qos(self) -> QosSettings:
        section = self.document["qos"]
        memory = section["memory"]
        return QosSettings(section["honorAnnotation"], section["cpu"]["guaranteed"]["limit"],
                           memory["guaranteed"]["limit"], memory["burstable"]["request"],
                           memory["burstable"]["limit"])

    @cached_property
    def placement(self) -> PlacementSettings:
        section = self.document["placement"]
        sensitive, egress = section["sensitiveLabel"], section["egressDenyLabel"]
        return PlacementSettings(Label(sensitive["key"], sensitive["value"]), section["zoneLabel"],
                                 tuple(section["encryptedNodeLabels"]), tuple(section["confidentialRuntimeClasses"]),
                                 Label(egress["key"], egress["value"]),
                                 EgressSettings(tuple(section["egress"]["internalCIDRs"]),
                                                tuple((peer["namespace"], peer["podSelector"])
                                                      for peer in section["egress"]["allowedPeers"]),
                                                tuple(section["egress"]["podCIDRs"])))

    @cached_property
    def dedicated_taint_key(self) -> str:
        """``tenancy.dedicatedTaintKey``: the taint that dedicates a node to one tenant."""
        return str(self.document["tenancy"]["dedicatedTaintKey"])

    @cached_property
    def priority_values(self) -> dict[str, int]:
        return dict(self.document["priorityClasses"]["values"])

    @cached_property
    def global_default_priority_class(self) -> str:
        return str(self.document["priorityClasses"]["globalDefault"])

    @cached_property
    def exempt_namespaces(self) -> tuple[str, ...]:
        return tuple(self.document["exemptNamespaces"])

    @cached_property
    def exempt_namespace_globs(self) -> tuple[str, ...]:
        return tuple(self.document["exemptNamespaceGlobs"])

    @cached_property
    def enforcement(self) -> EnforcementSettings:
        section = self.document["enforcement"]
        return EnforcementSettings(section["default"], dict(section["rules"]), tuple(
            NamespaceEnforcement(tuple(entry["namespaces"]), dict(entry["rules"])) for entry in section["namespaces"]))

    @cached_property
    def pod_security(self) -> PodSecuritySettings:
        section = self.document["podSecurity"]
        return PodSecuritySettings({mode: section[mode] for mode in POD_SECURITY_MODES}, tuple(
            NamespacePodSecurity(tuple(entry["namespaces"]), {mode: entry[mode] for mode in POD_SECURITY_MODES
                                                              if mode in entry})
            for entry in section["namespaces"]))

    def queue(self, name: str) -> QueueDefinition | None:
        return self.queues.definitions.get(name)
