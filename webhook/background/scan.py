"""`vgate audit scan`: what already runs, judged against today's policies (the background audit).

Admission judges a write once; a policy added or tightened afterwards, a NetworkPolicy changed by an
admin, a node relabelled, none of it reaches objects already admitted. Gatekeeper's audit and
Kyverno's background scan judge what exists; so does this. Every object of each kind vgate judges
on CREATE (the kinds registry: Pods, pod controllers, Volcano Jobs and PodGroups, Spark applications,
NetworkPolicies and the admin tiers, Services, Ingresses) is listed from the API server, page by
page, and judged as ``/validate`` would judge its CREATE: the same rules, exceptions, enforcement and
messages, with the cluster as it is (the kinds the server's cluster state keeps, from the same
lists: namespaces, nodes, queues, priority classes, pods, PodGroups, network policies, Services).
A kind whose CRD is not served is skipped and said so; an object the policies cannot evaluate is a
finding with its error, never dropped.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import requests

from ..cluster.api import ApiServer
from ..cluster.state import KINDS as STATE_KINDS
from ..cluster.state import ClusterState
from ..core.admission import decode_review
from ..core.config import Config
from ..core.contract import PolicyEngine
from ..core.kinds import KINDS, AdmissionKind, context_of
from ..core.policy_exceptions import PolicyException
from ..core.validation import Validation, validate
from ..offline.admit import review_for
from ..policy.regorus_engine import RegorusEngine

SCANNED: tuple[AdmissionKind, ...] = tuple(kind for kind in KINDS if "CREATE" in kind.operations
                                           and not kind.subresource)  # a Binding is a write, not an object
AUDITOR = "system:serviceaccount:vgate:vgate-audit"  # the user the judged CREATEs name
PAGE = 500


@dataclass(frozen=True)
class Finding:
    """One object's verdict: allowed or not, each rule's outcome, or why it could not be judged."""

    kind: str  # apiVersion/Kind, as the decision log names kinds
    namespace: str
    name: str
    allowed: bool
    violations: tuple[dict[str, Any], ...] = ()  # rule, action, message, exception
    message: str = ""  # the refusal as /validate would answer it
    error: str | None = None
    exempt: bool = False

    @property
    def title(self) -> str:
        return f"{self.kind.rsplit('/', 1)[-1]} {self.namespace + '/' if self.namespace else ''}{self.name}"

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace or None, "name": self.name, "allowed": self.allowed,
                "message": self.message or None, "violations": list(self.violations), "error": self.error,
                "exempt": self.exempt}


@dataclass
class Scan:
    """Every finding of one scan, what could not be listed, and what it cost."""

    findings: list[Finding] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # kinds not served: "sparkoperator.k8s.io/SparkApplication"
    cpu_seconds: float = 0.0  # judging only: listing is the API server's time
    started: str = ""
    snapshot: dict[str, Any] | None = None  # where sensitive workloads run, from the same lists (snapshot.py)

    @property
    def denied(self) -> list[Finding]:
        return [f for f in self.findings if not f.allowed]

    def per_rule(self) -> Counter[tuple[str, str, str]]:
        """(rule, action, namespace) -> objects: what the server's metrics expose per rule and namespace."""
        return Counter((str(v["rule"]), str(v["action"]), f.namespace) for f in self.findings for v in f.violations)

    def summary(self) -> dict[str, Any]:
        judged = [f for f in self.findings if not f.exempt]
        return {"started": self.started, "objects": len(self.findings), "judged": len(judged),
                "exempt": len(self.findings) - len(judged), "denied": len(self.denied),
                "errors": sum(f.error is not None for f in self.findings), "skippedKinds": self.skipped,
                "cpuMicrosecondsPerObject": round(self.cpu_seconds / len(judged) * 1e6, 1) if judged else None}


def list_path(group: str, version: str, resource: str) -> str:
    return f"/api/{version}/{resource}" if not group else f"/apis/{group}/{version}/{resource}"


def listed(api: ApiServer, path: str) -> Iterator[dict[str, Any]]:
    """Every object at a collection path, page by page (a list's items carry no apiVersion and kind)."""
    params: dict[str, Any] = {"limit": PAGE}
    while True:
        page = api.get(path, params)
        yield from page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return
        params = {"limit": PAGE, "continue": token}


def read_cluster(api: ApiServer) -> tuple[dict[AdmissionKind, list[dict[str, Any]]], list[dict[str, Any]], list[str]]:
    """The objects to judge per kind, the cluster state's objects, and the kinds not served."""
    skipped: list[str] = []
    cache: dict[str, list[dict[str, Any]]] = {}

    def objects(api_version: str, kind: str, path: str) -> list[dict[str, Any]] | None:
        if path not in cache:
            try:
                cache[path] = [{"apiVersion": api_version, "kind": kind, **item} for item in listed(api, path)]
            except requests.HTTPError as error:
                if error.response is None or error.response.status_code != 404:
                    raise
                skipped.append(f"{api_version.rsplit('/', 1)[0] if '/' in api_version else 'core'}/{kind}")
                return None
        return cache[path]

    judged = {}
    for kind in SCANNED:
        found = objects(f"{kind.group}/{kind.version}" if kind.group else kind.version, kind.kind,
                        list_path(kind.group, kind.version, kind.resource))
        if found is not None:
            judged[kind] = found
    state = [obj for watched in STATE_KINDS.values()
             for obj in objects(watched.group_version, watched.kind, watched.path) or []]
    return judged, state, sorted(set(skipped))


def as_created(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as its CREATE was, as far as the API server tells: a pod's ``spec.nodeName`` that no
    writer of the pod itself owns (its managedFields) was set by its binding, which the binding
    webhook judged, not by whoever created it; the scheduler's choice is not the creator's bypass."""
    spec = obj.get("spec")
    if obj.get("kind") != "Pod" or not isinstance(spec, dict) or "nodeName" not in spec:
        return obj
    managed = (obj.get("metadata") or {}).get("managedFields")
    if not isinstance(managed, list) or any(
            isinstance(entry, dict) and not entry.get("subresource")
            and "f:nodeName" in (((entry.get("fieldsV1") or {}).get("f:spec")) or {}) for entry in managed):
        return obj  # set by a writer of the pod (or unknown): judged as written
    return {**obj, "spec": {key: value for key, value in spec.items() if key != "nodeName"}}


def scan(judged: dict[AdmissionKind, list[dict[str, Any]]], state_objects: Iterable[dict[str, Any]], config: Config,
         engine: PolicyEngine, exceptions: Sequence[PolicyException], now: datetime) -> Scan:
    """Judge every object as its CREATE, against the cluster the state objects describe."""
    state = ClusterState.of_objects(state_objects)
    if isinstance(engine, RegorusEngine):
        engine.set_inventory(state.inventory())  # data.inventory, as the server's policies read it
    result = Scan(started=now.isoformat())
    for kind, objects in judged.items():
        for obj in objects:
            started = time.process_time()
            result.findings.append(_judge(kind, obj, state, config, engine, exceptions, now))
            if kind.kind == "Pod" and _placed(obj):
                result.findings.append(_judge_placement(obj, state, config, engine, exceptions, now))
            result.cpu_seconds += time.process_time() - started
    return result


def _placed(pod: dict[str, Any]) -> bool:
    """A pod on a node and not finished: where it runs is judged again, as its binding was."""
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _judge_placement(pod: dict[str, Any], state: ClusterState, config: Config, engine: PolicyEngine,
                     exceptions: Sequence[PolicyException], now: datetime) -> Finding:
    """The pod's binding to the node it runs on, judged against the node as it is now: a node that
    lost its encryption label, changed zone or took a foreign tenant's taint after the pod was bound
    (drift) fails the binding rule as the binding would fail today."""
    metadata = pod.get("metadata") or {}
    namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
               "target": {"apiVersion": "v1", "kind": "Node", "name": pod["spec"]["nodeName"]}}
    review = review_for(binding, namespace=namespace, user=AUDITOR, uid=f"scan-binding-{namespace}-{name}")
    review["request"].update(resource={"group": "", "version": "v1", "resource": "pods"}, subResource="binding")
    request = decode_review(orjson.dumps(review), config.server.max_json_depth)
    validation = validate(request, engine, config, exceptions, now, context_of(request, state, config))
    return _finding("v1/Binding", namespace, name, validation)


def _judge(kind: AdmissionKind, obj: dict[str, Any], state: ClusterState, config: Config, engine: PolicyEngine,
           exceptions: Sequence[PolicyException], now: datetime) -> Finding:
    metadata = obj.get("metadata") or {}
    namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
    api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
    review = review_for(as_created(obj), namespace=namespace or None, user=AUDITOR, uid=f"scan-{namespace}-{name}")
    review["request"]["resource"]["resource"] = kind.resource
    if not namespace:  # a cluster-scoped object: no namespace in its request
        review["request"]["namespace"] = ""
        review["request"]["object"]["metadata"].pop("namespace", None)
    request = decode_review(orjson.dumps(review), config.server.max_json_depth)
    validation = validate(request, engine, config, exceptions, now, context_of(request, state, config))
    return _finding(f"{api_version}/{kind.kind}", namespace, name, validation)


def _finding(kind: str, namespace: str, name: str, validation: Validation) -> Finding:
    return Finding(kind, namespace, name, validation.decision.allowed,
                   tuple({"rule": o.rule, "action": o.action, "message": o.message, "exception": o.exception}
                         for o in validation.outcomes),
                   validation.decision.message or "", validation.error, validation.exempt)


def run_scan(kubeconfig: str | None, config_path: str | None, policy_dir: str, now: datetime,
             connect: Callable[[], ApiServer] | None = None) -> tuple[Scan, list[str]]:
    """List the cluster (with ``kubeconfig``, else as the pod's ServiceAccount) and judge it; the
    scan and a warning per policy exception the server would reject too. Raises SourceError (config,
    policies) or InputError (a cluster that cannot be read)."""
    from ..core.errors import InputError
    from ..files.config_file import load_config
    from ..files.exception_files import load_configured_exceptions
    from ..policy.sources import load_policy_set

    config = load_config(config_path)
    engine = RegorusEngine(load_policy_set(policy_dir), config.document)
    exceptions, rejected = load_configured_exceptions(config.exceptions, now)
    try:
        api = connect() if connect else ApiServer.connect(kubeconfig)
        with api:
            judged, state, skipped = read_cluster(api)
    except (OSError, ValueError, KeyError, requests.RequestException) as error:
        raise InputError(f"{kubeconfig or 'in-cluster'}: cannot read the cluster: {error}") from None
    from .snapshot import take_snapshot

    result = scan(judged, state, config, engine, exceptions, now)
    result.skipped = skipped
    result.snapshot = take_snapshot(state, result, config, now)
    return result, [f"policy exception rejected (the server rejects it too): {error}" for error in rejected]
