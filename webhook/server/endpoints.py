"""vgate's HTTP surface as one table, without I/O: (method, path) -> handler(body) -> Answer.

Endpoints: POST /mutate, POST /validate (AdmissionReview v1/v1beta1), GET /healthz, and, unless
the probes have a port of their own (``--metrics-bind``), GET /readyz and /metrics. Whatever
serves HTTP (``asgi``, the serving path; ``flask_adapter``, kept for comparison under gunicorn and
``--server granian-flask``) reads a whole body within its limits and hands it here, or hands here
the refusal of one it could not read (``refuse``: 408, 413). One error mapping for all of it: a
RequestError is its status, an unknown path 404, a known path asked with another method 405,
anything unexpected 500; every error is one line of JSON, ``{"error": ..., "status": ...}``, and
no traceback ever reaches a client. Admission refusals are recorded by the gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.errors import RequestError
from ..forward.forwarder import read_status
from .gateway import Offload
from .metrics import Metrics
from .reload import LiveGateway

log = logging.getLogger("vgate")
JSON = "application/json"
HEALTHY = orjson.dumps({"status": "ok"})
ADMISSION = {"/mutate": "mutate", "/validate": "validate"}  # path -> the endpoint records and metrics name


@dataclass(frozen=True)
class Answer:
    """What one request gets: status, body, and the body's content type."""

    status: int
    body: bytes
    content_type: str = JSON


def error_answer(status: int, message: str) -> Answer:
    """The one error shape: a one-line JSON object (whitespace in the message folded)."""
    return Answer(status, orjson.dumps({"error": " ".join(message.split()), "status": status}))


class Endpoints:
    """The table for one worker's live gateway (read once per request: a reload may swap it)."""

    def __init__(self, live: LiveGateway, metrics: Metrics, *, probes: bool = True) -> None:
        self.live, self.metrics, self.probes = live, metrics, probes
        routes: dict[tuple[str, str], Callable[[bytes], Answer]] = {
            ("POST", "/mutate"): lambda body: self._admission("mutate", body),
            ("POST", "/validate"): lambda body: self._admission("validate", body),
            ("GET", "/healthz"): lambda body: Answer(200, HEALTHY),
        }
        if probes:
            routes[("GET", "/readyz")] = lambda body: readyz(live)
            routes[("GET", "/metrics")] = lambda body: Answer(200, *metrics.exposition())
        self.routes = routes
        self._paths = {path for _, path in routes}

    def max_body_bytes(self) -> int:
        return self.live.current.config.server.max_body_bytes

    def body_read_timeout(self) -> float:
        return self.live.current.config.server.body_read_timeout_seconds

    def answer(self, method: str, path: str, body: bytes) -> Answer:
        """The answer to a request whose body was read whole and within the limit."""
        handler = self.routes.get((method, path))
        if handler is None:
            if path in self._paths:
                return error_answer(405, f"{method} is not allowed on {path}")
            return error_answer(404, f"not found: {path} is not an endpoint of vgate")
        try:
            return handler(body)
        except Exception as error:  # noqa: BLE001 - every failure is one line of JSON
            return _failure(method, path, error)

    async def answer_async(self, method: str, path: str, body: bytes, offload: Offload) -> Answer:
        """``answer`` on the running event loop: /mutate and /validate there (``Gateway.answer_async``),
        everything else on an app thread (``offload``)."""
        endpoint = _admission_endpoint(method, path)
        if endpoint is None:
            return await offload(self.answer, method, path, body)
        try:
            response = await self.live.current.answer_async(endpoint, body, offload)
        except Exception as error:  # noqa: BLE001 - every failure is one line of JSON
            return _failure(method, path, error)
        return Answer(200, orjson.dumps(response))

    def refuse(self, method: str, path: str, error: RequestError, started: float | None = None) -> Answer:
        """The answer to a body that could not be read whole (408) or is too large (413); recorded
        and counted when it was meant for an admission endpoint."""
        endpoint = _admission_endpoint(method, path)
        if endpoint is None:
            return self.answer(method, path, b"")  # not an admission request: its body does not matter
        self.live.current.refuse(endpoint, error, started)
        return error_answer(error.status, error.message)

    def too_large(self, method: str, path: str, started: float | None = None) -> Answer:
        return self.refuse(method, path, RequestError(413, f"request body is larger than {self.max_body_bytes()} "
                                                           "bytes"), started)

    def timed_out(self, method: str, path: str, timeout: float, started: float | None = None) -> Answer:
        return self.refuse(method, path, RequestError(408, f"request body not received within {timeout:g} s"),
                           started)

    def _admission(self, endpoint: str, body: bytes) -> Answer:
        gateway = self.live.current  # one gateway for the whole request, even if a reload swaps it meanwhile
        response = gateway.mutate(body) if endpoint == "mutate" else gateway.validate(body)
        return Answer(200, orjson.dumps(response))


def _admission_endpoint(method: str, path: str) -> str | None:
    """The admission endpoint (``mutate``, ``validate``) a request is for; None for any other."""
    return ADMISSION.get(path) if method == "POST" else None


def _failure(method: str, path: str, error: Exception) -> Answer:
    if isinstance(error, RequestError):  # recorded by the gateway before it raised
        return error_answer(error.status, error.message)
    log.error("unhandled error on %s %s", method, path, exc_info=error)
    return error_answer(500, "internal error; see the vgate log")


def readyz(live: LiveGateway) -> Answer:
    status, document = readiness(live)
    return Answer(status, orjson.dumps(document)) if status == 200 else error_answer(status, document["error"])


def readiness(live: LiveGateway) -> tuple[int, dict[str, Any]]:
    """/readyz's status and body: 503 with the reason while the decision log cannot be written or
    no policy evaluator can be started."""
    gateway, status = live.current, live.status
    unready = gateway.audit_unready() or gateway.engine_unready()
    if unready:
        return 503, {"error": unready, "status": 503}
    cluster = gateway.cluster_status()
    if cluster is not None and not all(kind["synced"] for kind in cluster.values()):
        waiting = [f"{name}" + (f" ({kind['error'][:160]})" if kind["error"] else "")
                   for name, kind in sorted(cluster.items()) if not kind["synced"]]
        return 503, {"error": f"the cluster state has not been listed yet (cluster.watch): {'; '.join(waiting)}",
                     "status": 503}
    audit = gateway.config.audit
    return 200, {"status": "ready", "policyRevision": gateway.revision, "policyEngine": gateway.engine.name,
                 "config": gateway.config.source,
                 "lastReload": {"at": status.at, "ok": status.ok, "error": status.error},
                 **({"cluster": cluster} if cluster is not None else {}),
                 # detail only: admissions never wait for the audit system, so neither does readiness
                 **({"forwarding": read_status(audit.dir)} if audit.forward.url else {})}

