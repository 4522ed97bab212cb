"""The HTTP layer: Flask views that read a body, call the gateway, serialise the answer.

Endpoints: POST /mutate, POST /validate (AdmissionReview v1/v1beta1), GET /healthz, /readyz,
/metrics. Every error is a one-line JSON object ``{"error": ..., "status": ...}``; no traceback
ever reaches a client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from flask import Flask, Response, request
from flask.json.provider import JSONProvider
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from ..core.errors import RequestError
from .asgi import BODY_TIMEOUT_KEY
from .metrics import Metrics
from .reload import LiveGateway

log = logging.getLogger("vgate")


class OrjsonProvider(JSONProvider):
    """orjson parses a 3 KB AdmissionReview ~2.5x faster than the standard library."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return orjson.dumps(obj).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = args[0] if len(args) == 1 else (args or kwargs)
        return Response(orjson.dumps(obj), mimetype="application/json")


def create_app(live: LiveGateway, metrics: Metrics, *, probes: bool = True) -> Flask:
    """A Flask app serving the gateway in force and its metrics; build as many as you like.

    ``probes=False`` (``--metrics-bind`` gives them a port of their own): /readyz and /metrics are
    not served on the admission port, which then answers the API server alone (and /healthz)."""
    app = Flask("vgate")
    app.json = json = OrjsonProvider(app)

    def admission(endpoint: str) -> Response:
        started = time.perf_counter()
        gateway = live.current  # one gateway for the whole request, even if a reload swaps it meanwhile
        limit = gateway.config.server.max_body_bytes
        request.max_content_length = limit
        timeout = request.environ.get(BODY_TIMEOUT_KEY)
        if timeout is not None:  # the event loop gave up waiting for the body (asgi.py)
            error = RequestError(408, f"request body not received within {timeout:g} s")
            gateway.refuse(endpoint, error, started)
            raise error
        try:
            body = _read_body(limit)
        except RequestEntityTooLarge:
            error = RequestError(413, f"request body is larger than {limit} bytes")
            gateway.refuse(endpoint, error, started)
            _drain_body(limit * _DRAIN_FACTOR)
            raise error from None
        handler: Callable[[bytes], dict[str, Any]] = gateway.mutate if endpoint == "mutate" else gateway.validate
        return json.response(handler(body))

    @app.post("/mutate")
    def mutate_view() -> Response:
        return admission("mutate")

    @app.post("/validate")
    def validate_view() -> Response:
        return admission("validate")

    @app.get("/healthz")
    def healthz() -> Response:
        return Response(_HEALTHY, mimetype="application/json")

    if probes:
        @app.get("/readyz")
        def readyz() -> Response:
            status, payload = _readyz(live)
            return Response(payload, status=status, mimetype="application/json")

        @app.get("/metrics")
        def metrics_view() -> Response:
            payload, content_type = metrics.exposition()
            return Response(payload, content_type=content_type)

    @app.errorhandler(RequestError)
    def request_error(error: RequestError) -> Response:
        return _error(error.status, error.message)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        return _error(error.code or 500, error.description or error.name)

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _error(500, "internal error; see the vgate log")

    return app


_DRAIN_FACTOR = 4
_HEALTHY = orjson.dumps({"status": "ok"})


def direct_answers(live: LiveGateway, *, probes: bool = True) -> Callable[[str, str, bytes], tuple[int, bytes] | None]:
    """The admission endpoints, /healthz and (with ``probes``, as ``create_app``) /readyz without
    Flask (asgi.WsgiBehindLoop's ``direct``): the same gateway calls, errors and records as the views
    above, for a body the event loop read in full and within the limit; None for anything else,
    which the Flask app answers."""
    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method == "GET" and path == "/healthz":
            return 200, _HEALTHY
        if method == "GET" and path == "/readyz" and probes:
            return _readyz(live)
        if method != "POST" or path not in ("/mutate", "/validate"):
            return None
        gateway = live.current  # one gateway for the whole request, even if a reload swaps it meanwhile
        try:
            return 200, orjson.dumps(gateway.mutate(body) if path == "/mutate" else gateway.validate(body))
        except RequestError as error:  # recorded by the gateway before it raised
            return error.status, _error_body(error.status, error.message)
        except Exception:
            log.exception("unhandled error on %s %s", method, path)
            return 500, _error_body(500, "internal error; see the vgate log")
    return answer


def _readyz(live: LiveGateway) -> tuple[int, bytes]:
    """/readyz's status and JSON body on the admission port, with or without Flask."""
    status, document = readiness(live)
    return status, orjson.dumps(document) if status == 200 else _error_body(status, document["error"])


def readiness(live: LiveGateway) -> tuple[int, dict[str, Any]]:
    """/readyz's status and body: 503 with the reason while the decision log cannot be written."""
    gateway, status = live.current, live.status
    unready = gateway.audit_unready()
    if unready:
        return 503, {"error": unready, "status": 503}
    cluster = gateway.cluster_status()
    if cluster is not None and not all(kind["synced"] for kind in cluster.values()):
        waiting = [f"{name}" + (f" ({kind['error'][:160]})" if kind["error"] else "")
                   for name, kind in sorted(cluster.items()) if not kind["synced"]]
        return 503, {"error": f"the cluster state has not been listed yet (cluster.watch): {'; '.join(waiting)}",
                     "status": 503}
    return 200, {"status": "ready", "policyRevision": gateway.revision, "policyEngine": gateway.engine.name,
                 "config": gateway.config.source,
                 "lastReload": {"at": status.at, "ok": status.ok, "error": status.error},
                 **({"cluster": cluster} if cluster is not None else {})}


def _read_body(limit: int) -> bytes:
    """The body, at most ``limit`` bytes whatever its framing: a Content-Length over the limit is
    refused before reading, and a chunked body (no Content-Length) is read only to limit + 1 bytes."""
    if request.content_length is not None:
        return request.get_data(cache=False)  # werkzeug refuses a Content-Length over the limit
    stream, parts, size = request.stream, [], 0
    while size <= limit:
        part = stream.read(min(65536, limit + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    if size > limit:
        raise RequestEntityTooLarge()
    return b"".join(parts)


def _drain_body(limit: int) -> None:
    """Read and drop an oversized body (up to ``limit`` bytes) so the client gets to read the 413.

    gunicorn closes a connection whose unread body exceeds 64 KiB; a client still sending then
    sees a reset instead of our answer. Bodies beyond ``limit`` are not worth reading: closed.
    """
    stream = request.environ["wsgi.input"]
    remaining = request.content_length or 0
    if remaining > limit:
        return
    while remaining > 0:
        chunk = stream.read(min(remaining, 65536))
        if not chunk:
            return
        remaining -= len(chunk)


def _error_body(status: int, message: str) -> bytes:
    return orjson.dumps({"error": " ".join(message.split()), "status": status})


def _error(status: int, message: str) -> Response:
    return Response(_error_body(status, message), status=status, mimetype="application/json")
