"""The whole admission path without a cluster: mutate a manifest, then validate what came out.

What `vgate test` runs every sample through, and the seam `vgate eval` builds on. It goes
through the same codec and the same pure functions as the webhook, so a manifest is judged
offline exactly as the API server would have it judged.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import jsonpatch
import orjson

from ..core.admission import AdmissionRequest, Decision, decode_review
from ..core.config import Config
from ..core.contract import PolicyEngine
from ..core.kind_handler import NO_CLUSTER, ClusterView
from ..core.kinds import context_of, entry_of
from ..core.mutation import mutate
from ..core.patching import Mutation
from ..core.policy_exceptions import PolicyException
from ..core.validation import Validation, validate
from .chain.model import Cluster, Delivery, deliver


@dataclass(frozen=True)
class OfflineResult:
    submitted: dict[str, Any]
    mutation: Mutation  # vgate's (first) pass
    mutated: dict[str, Any]  # what validation judged
    validation: Validation
    delivery: Delivery | None = None  # the modelled admission chain, unless judged as submitted
    evaluated: dict[str, Any] | None = None  # what the rules were given, when not the review of ``mutated``


def review_for(manifest: dict[str, Any], *, operation: str = "CREATE", namespace: str | None = None,
               user: str = "vgate-offline", uid: str = "offline", dry_run: bool = True,
               old_object: dict[str, Any] | None = None) -> dict[str, Any]:
    """An AdmissionReview as the API server would send it for ``manifest`` (on UPDATE, the object
    before is ``old_object``, else the same object)."""
    group, _, version = str(manifest.get("apiVersion", "")).rpartition("/")
    metadata = manifest.get("metadata") or {}
    namespace = namespace or metadata.get("namespace") or "default"
    obj = copy.deepcopy(manifest)
    obj.setdefault("metadata", {})["namespace"] = namespace
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": manifest.get("kind", "")},
            "resource": {"group": group, "version": version, "resource": str(manifest.get("kind", "")).lower() + "s"},
            "namespace": namespace,
            "name": metadata.get("name", ""),
            "operation": operation,
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": (old_object or obj) if operation == "UPDATE" else None,
            "dryRun": dry_run,
        },
    }


def admit(manifest: dict[str, Any], config: Config, engine: PolicyEngine,
          exceptions: Sequence[PolicyException] = (), *, cluster: Cluster | None = None,
          view: ClusterView | None = None, **review_options: Any) -> OfflineResult:
    """Mutate, apply the patch, and validate the mutated object, as the API server chains them.

    With ``cluster``, the object first goes through the modelled admission chain (defaults,
    built-in plugins, other webhooks, reinvocation: ``chain.model``), as a real API server
    delivers it; without, it is judged as written. ``view`` is the cluster its kind reads (a
    namespace's queue annotation, a Spark executor's driver), by default ``cluster``, or nothing.
    """
    view = view or cluster or NO_CLUSTER
    if cluster is not None:
        return _admit_through_chain(manifest, config, engine, exceptions, cluster, view, **review_options)
    review = review_for(manifest, **review_options)
    submitted = review["request"]["object"]
    request = _request(review, config)
    mutation = mutate(request, config, context_of(request, view, config))
    mutated = jsonpatch.apply_patch(submitted, mutation.patch)
    review["request"]["object"] = mutated
    return OfflineResult(submitted, mutation, mutated, _judge(review, config, engine, exceptions, view))


def is_binding(manifest: dict[str, Any]) -> bool:
    return manifest.get("apiVersion") == "v1" and manifest.get("kind") == "Binding"


def admit_binding(manifest: dict[str, Any], config: Config, engine: PolicyEngine,
                  exceptions: Sequence[PolicyException], cluster: ClusterView, **review_options: Any) -> OfflineResult:
    """Judge a Binding (as pods/binding) against the Nodes and Pods given before it, with the
    server's own cluster-state code; an allowed one puts its pod on the node for the bindings after it."""
    review = review_for(manifest, **review_options)
    review["request"].update(resource={"group": "", "version": "v1", "resource": "pods"}, subResource="binding")
    request = _request(review, config)
    context = context_of(request, cluster, config)
    validation = validate(request, engine, config, exceptions, now=datetime.now(timezone.utc), context=context)
    entry = entry_of(request)
    if validation.decision.allowed and entry is not None:
        entry.handler.admitted(request, cluster)
    evaluated = {**review, "binding": context.binding} if isinstance(context.binding, dict) else None
    return OfflineResult(manifest, Mutation(), review["request"]["object"], validation, evaluated=evaluated)


def _request(review: dict[str, Any], config: Config) -> AdmissionRequest:
    """The review through the webhook's own codec, as the server would receive it."""
    return decode_review(orjson.dumps(review), config.server.max_json_depth)


def _judge(review: dict[str, Any], config: Config, engine: PolicyEngine,
           exceptions: Sequence[PolicyException], view: ClusterView) -> Validation:
    request = _request(review, config)
    return validate(request, engine, config, exceptions, now=datetime.now(timezone.utc),
                    context=context_of(request, view, config))


def _admit_through_chain(manifest: dict[str, Any], config: Config, engine: PolicyEngine,
                         exceptions: Sequence[PolicyException], cluster: Cluster, view: ClusterView,
                         **options: Any) -> OfflineResult:
    operation = options.pop("operation", "CREATE")
    namespace = options.pop("namespace", None) or (manifest.get("metadata") or {}).get("namespace") or "default"
    passes: list[Mutation] = []

    def vgate(obj: dict[str, Any]) -> list[dict[str, Any]]:
        request = _request(review_for(obj, namespace=namespace, **options), config)
        passes.append(mutate(request, config, context_of(request, view, config)))
        return passes[-1].patch

    delivery = deliver(manifest, namespace, operation, cluster, vgate)
    mutation = passes[0] if passes else Mutation()
    if delivery.refused:
        refusal = Decision(allowed=False, code=403, message=f"the API server refused it: {delivery.refused}")
        return OfflineResult(manifest, mutation, delivery.final, Validation(refusal), delivery)
    if not cluster.calls_vgate(namespace):
        return OfflineResult(manifest, mutation, delivery.final, Validation(Decision(), exempt=True), delivery)
    review = review_for(delivery.final, operation=operation, namespace=namespace, **options)
    judged = _judge(review, config, engine, exceptions, view)
    return OfflineResult(manifest, mutation, delivery.final, judged, delivery)
