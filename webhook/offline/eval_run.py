"""`vgate eval`'s work: the config, policies, exceptions and chain model it names, and the verdicts.

The command line parses its options into an ``EvalRequest``; ``run_eval`` loads what the server
would load from the same config (its ``exceptions.dir`` included) and judges the manifests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests

from ..cluster.api import ApiServer
from ..cluster.state import ADMIN_POLICIES, BASELINE_POLICIES
from ..core.errors import InputError
from ..files.config_file import load_config
from ..files.exception_files import load_configured_exceptions
from ..policy.regorus_engine import RegorusEngine
from ..policy.sources import load_policy_set
from .admit import is_binding
from .chain.crd_defaults import read_crd_file
from .chain.model import Cluster
from .chain.volcano import CHART_ADMISSIONS, read_admission_config
from .eval_manifests import Verdict, evaluate, load_manifests


@dataclass(frozen=True)
class EvalRequest:
    """`vgate eval`'s options, as given."""

    files: tuple[str, ...]
    operation: str = "CREATE"
    namespace: str | None = None
    user: str = "vgate-eval"
    config_path: str | None = None
    policy_dir: str = "policies"
    as_submitted: bool = False
    with_volcano: bool = False
    volcano_config: str | None = None
    crd_files: tuple[str, ...] = ()
    volcano_admissions: str | None = None
    kubeconfig: str | None = None  # read the cluster's Namespaces (their labels and Volcano queue annotations)

    def volcano_modelled(self) -> bool:
        """Volcano's mutators are modelled when asked for, or when any of their settings is given."""
        return self.with_volcano or self.volcano_config is not None or self.volcano_admissions is not None

    def admissions(self) -> list[str]:
        """Volcano's enabled mutators: as given, else its chart's (and its pod mutator with a config)."""
        if self.volcano_admissions:
            return [path.strip() for path in self.volcano_admissions.split(",")]
        return [*CHART_ADMISSIONS, *(["/pods/mutate"] if self.volcano_config else [])]


def run_eval(request: EvalRequest, now: datetime) -> tuple[list[Verdict], list[str]]:
    """The verdicts, and a warning per policy exception the server would reject too.

    Raises SourceError (config, policies) or InputError (manifests, CRDs, the model); with
    ``kubeconfig``, the cluster's Namespaces come first (a Namespace among the manifests overrides its
    twin), and an API server that cannot be read is an InputError.
    """
    config = load_config(request.config_path)
    engine = RegorusEngine(load_policy_set(request.policy_dir), config.document)
    cluster = None if request.as_submitted else Cluster.build(
        config, [crd for path in request.crd_files for crd in read_crd_file(path)],
        with_volcano=request.volcano_modelled(),
        resource_groups=read_admission_config(request.volcano_config) if request.volcano_config else [],
        volcano_admissions=request.admissions())
    manifests = load_manifests(list(request.files))
    if cluster is not None and request.kubeconfig:
        _learn_cluster(cluster, request.kubeconfig,
                       {str((m.get("metadata") or {}).get("namespace") or request.namespace or "default")
                        for _, m in manifests if is_binding(m)})
    exceptions, rejected = load_configured_exceptions(config.exceptions, now)
    warnings = [f"policy exception rejected (the server rejects it too): {error}" for error in rejected]
    verdicts = evaluate(manifests, config, engine, exceptions,
                        operation=request.operation, namespace=request.namespace, user=request.user, cluster=cluster)
    return verdicts, warnings


def _learn_cluster(cluster: Cluster, kubeconfig: str, binding_namespaces: set[str]) -> None:
    """The live cluster into the model: Namespaces (labels for exemption, Volcano queue annotations);
    NetworkPolicies, Services and every Pod (what a sensitive pod's effective egress is computed
    from, as the server's cluster state holds them); and for Bindings among the manifests the Nodes."""
    try:
        with ApiServer.from_kubeconfig(kubeconfig) as api:
            namespaces = api.get("/api/v1/namespaces").get("items") or []
            nodes = api.get("/api/v1/nodes").get("items") or [] if binding_namespaces else []
            listed = [(version, kind, api.get(path).get("items") or []) for version, kind, path in (
                ("v1", "Pod", "/api/v1/pods"), ("v1", "Service", "/api/v1/services"),
                ("networking.k8s.io/v1", "NetworkPolicy", "/apis/networking.k8s.io/v1/networkpolicies"))]
            listed += [(watched.group_version, watched.kind, _listed_if_served(api, watched.path))
                       for watched in (ADMIN_POLICIES, BASELINE_POLICIES)]
    except (OSError, ValueError, KeyError, StopIteration, requests.RequestException) as error:
        raise InputError(f"{kubeconfig}: cannot read the cluster: {error}") from None
    for namespace in namespaces:
        cluster.learn({"apiVersion": "v1", "kind": "Namespace", "metadata": namespace.get("metadata") or {}})
    for version, kind, objects in [("v1", "Node", nodes), *listed]:  # a list's items carry no apiVersion and kind
        for obj in objects:
            cluster.remember({"apiVersion": version, "kind": kind, **obj})
    cluster.network_known = True


def _listed_if_served(api: ApiServer, path: str) -> list[dict[str, Any]]:
    """A CRD's objects, or none where the CRD is not installed (the admin tiers are optional)."""
    try:
        return list(api.get(path).get("items") or [])
    except requests.HTTPError as error:
        if error.response is not None and error.response.status_code == 404:
            return []
        raise
