"""The AdmissionReview codec: bytes in, a checked request out; a decision in, a review out.

Everything the API server could send that we cannot act on is refused here with a RequestError
(HTTP 400/413), so the mutation and validation code only ever sees well-formed requests.
The answer mirrors the request's apiVersion (v1 or v1beta1), as the API server requires.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson

from .errors import RequestError

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` vgate decides on; ``review`` is the whole parsed
    body and ``raw`` its bytes, which policy engines evaluate without parsing them again."""

    api_version: str
    uid: str
    group: str
    version: str
    kind: str
    resource: str
    namespace: str
    name: str
    operation: str
    sub_resource: str
    user: str
    groups: tuple[str, ...]
    dry_run: bool
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    review: dict[str, Any] = field(repr=False)
    raw: bytes = field(repr=False, default=b"")

    @property
    def api_group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified_name(self) -> str:
        """``namespace/name`` as messages name the object (``(generated name)`` before it has one)."""
        name = self.name or "(generated name)"
        return f"{self.namespace}/{name}" if self.namespace else name


@dataclass
class Decision:
    """What the webhook answers: the AdmissionResponse fields vgate sets."""

    allowed: bool = True
    patch: list[dict[str, Any]] = field(default_factory=list)
    code: int | None = None
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)


def decode_review(body: bytes, max_depth: int) -> AdmissionRequest:
    """Parse and check an AdmissionReview body; raise RequestError(400) with a one-line reason."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestError(400, f"malformed JSON: {exc}") from exc
    if depth_bound(body) > max_depth:
        _check_depth(review, max_depth)
    if not isinstance(review, dict):
        raise RequestError(400, "body is not an AdmissionReview: expected a JSON object")
    if review.get("kind") != "AdmissionReview":
        raise RequestError(400, f"body is not an AdmissionReview: kind is {review.get('kind')!r}")
    api_version = review.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise RequestError(400, f"unsupported apiVersion {api_version!r}: expected one of {', '.join(API_VERSIONS)}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise RequestError(400, "AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise RequestError(400, "request.uid is missing or not a string")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str) or not isinstance(kind.get("version"), str):
        raise RequestError(400, "request.kind must be an object with kind and version")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise RequestError(400, f"request.operation {operation!r} is not one of {', '.join(OPERATIONS)}")
    obj, old = request.get("object"), request.get("oldObject")
    if obj is not None and not isinstance(obj, dict):
        raise RequestError(400, "request.object must be a JSON object")
    if old is not None and not isinstance(old, dict):
        raise RequestError(400, "request.oldObject must be a JSON object")
    if obj is None and operation in ("CREATE", "UPDATE"):
        raise RequestError(400, f"request.object is required for {operation}")
    if operation == "UPDATE" and obj and old and obj.get("kind") and old.get("kind") != obj.get("kind"):
        # What changed cannot be told from two different kinds: never judged as if it could.
        raise RequestError(400, f"request.oldObject is a {old.get('kind')!r}, request.object a {obj.get('kind')!r}")
    user_info: dict[str, Any] = request["userInfo"] if isinstance(request.get("userInfo"), dict) else {}
    groups: list[Any] = user_info["groups"] if isinstance(user_info.get("groups"), list) else []
    resource: dict[str, Any] = request["resource"] if isinstance(request.get("resource"), dict) else {}
    metadata = (obj or old or {}).get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    return AdmissionRequest(
        api_version=api_version,
        uid=uid,
        group=str(kind.get("group") or ""),
        version=kind["version"],
        kind=kind["kind"],
        resource=str(resource.get("resource") or ""),
        namespace=_text(request.get("namespace")) or _text(metadata.get("namespace")),
        name=_text(request.get("name")) or _text(metadata.get("name")),
        operation=operation,
        sub_resource=_text(request.get("subResource")),
        user=_text(user_info.get("username")),
        groups=tuple(str(g) for g in groups),
        dry_run=request.get("dryRun") is True,
        object=obj,
        old_object=old,
        review=review,
        raw=body,
    )


def encode_response(request: AdmissionRequest, decision: Decision) -> dict[str, Any]:
    """Build the AdmissionReview answer, in the apiVersion the request came in."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": decision.allowed}
    if decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(decision.patch)).decode("ascii")
    if not decision.allowed or decision.code is not None:
        response["status"] = {
            "code": decision.code or 403,
            "message": decision.message,
            "reason": "Forbidden" if (decision.code or 403) == 403 else "InternalError",
        }
    if decision.warnings:
        response["warnings"] = decision.warnings
    if decision.audit_annotations:
        response["auditAnnotations"] = decision.audit_annotations
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def depth_bound(body: bytes) -> int:
    """A bound on the nesting depth of the JSON in ``body``: its ``{`` and ``[`` bytes. Every
    container opens with one (a bracket in a string only raises the count), so a body with no more
    of them than the limit needs no walk: ~3 µs to count in a 4.5 KB pod, against ~14 µs to walk it.
    (Discounting ``{}`` and ``[]`` pairs, empty containers, would pass bodies with managedFields too,
    but costs ~8 µs more: as much as it would save.)"""
    return body.count(b"{") + body.count(b"[")


def _check_depth(document: Any, max_depth: int) -> None:
    """Refuse documents nested deeper than ``max_depth`` before any recursive code walks them.

    Level by level, with exact type checks: ~2x faster than a stack of (node, depth) pairs, and
    it runs on every request.
    """
    level = [document] if type(document) is dict or type(document) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise RequestError(400, f"JSON nested deeper than {max_depth} levels")
        deeper: list[Any] = []
        for node in level:
            children = node.values() if type(node) is dict else node
            deeper += [child for child in children if type(child) is dict or type(child) is list]
        level = deeper
