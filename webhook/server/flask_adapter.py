"""The endpoint table behind Flask, for WSGI servers: kept to compare against, never the serving path.

``vgate serve --server gunicorn`` (gthread workers) and ``--server granian-flask`` (granian's WSGI
interface) serve this app; the default serves the same table from ``asgi``, with no framework. Every
request goes to ``endpoints.Endpoints``: this module only reads the body (at most the limit; a
larger one is refused with 413, and read and dropped up to ``DRAIN_FACTOR`` times the limit so the
client reads the answer) and writes the answer. Embedders get the same table with any WSGI server.
"""

from __future__ import annotations

import time

from flask import Flask, Response, request

from .asgi import DRAIN_FACTOR
from .draining import closes_connections
from .endpoints import Answer, Endpoints
from .metrics import Metrics
from .reload import LiveGateway

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def create_app(live: LiveGateway, metrics: Metrics, *, probes: bool = True) -> Flask:
    """A Flask app answering every path from the endpoint table of ``live``."""
    endpoints = Endpoints(live, metrics, probes=probes)
    app = Flask("vgate")

    @app.route("/", defaults={"path": ""}, methods=_METHODS)
    @app.route("/<path:path>", methods=_METHODS)
    def table(path: str) -> Response:
        started = time.perf_counter()
        limit = endpoints.max_body_bytes()
        body = _read_body(limit)
        if body is None:
            answer = endpoints.too_large(request.method, request.path, started)
            _drain_body(limit * DRAIN_FACTOR)
        else:
            answer = endpoints.answer(request.method, request.path, body)
        return _response(answer)

    return app


def _response(answer: Answer) -> Response:
    response = Response(answer.body, status=answer.status, content_type=answer.content_type)
    if closes_connections():  # this worker is being replaced: its clients move to another (``draining``)
        response.headers["Connection"] = "close"
    return response


def _read_body(limit: int) -> bytes | None:
    """The body, or None when it is larger than ``limit`` whatever its framing: a Content-Length over
    the limit is refused before reading, and a chunked body is read only to limit + 1 bytes."""
    if request.content_length is not None:
        return None if request.content_length > limit else request.get_data(cache=False)
    stream, parts, size = request.stream, [], 0
    while size <= limit:
        part = stream.read(min(65536, limit + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    return None if size > limit else b"".join(parts)


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
