"""/metrics, /healthz and /readyz on a port of their own (``vgate serve --metrics-bind``), plain HTTP.

The admission port then serves the API server alone: with mutual TLS the kubelet's probes and
Prometheus (no client certificate) could not reach it, and a NetworkPolicy that lets the
monitoring namespace scrape 8443 also lets it send AdmissionReviews. This port has no admission
endpoint at all. It is served by the master: /metrics merges every worker's samples (the
multiprocess directory), and /readyz is ready only while every live worker reports ready in the
status file it rewrites every few seconds (``write_status``); a worker that has not reported for
``STALE_SECONDS`` counts as not ready.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .draining import is_marked
from .endpoints import readiness
from .granian_server import host_and_port
from .metrics import merged_exposition, running
from .reload import LiveGateway
from .runtime import RuntimeDir

STALE_SECONDS = 30.0


def write_status(live: LiveGateway) -> None:
    """This worker's /readyz answer, for the master's probe port. Without one, the evaluator child is
    still checked (and a stopped one replaced): that part of readiness acts, not only reports."""
    runtime = RuntimeDir.current()
    if runtime is None or not runtime.probes_served:
        live.current.engine_unready()
        return
    code, body = readiness(live)
    path = runtime.status / f"{os.getpid()}.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"code": code, "body": body, "written": time.time()}))
    os.replace(temporary, path)


class _ProbeServer(ThreadingHTTPServer):
    """A prober that hangs up first (a load balancer's health check resets the connection once it has
    the status line) is no error: http.server would print a traceback to stderr for each one."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def serve_probes(bind: str, status_dir: Path) -> ThreadingHTTPServer:
    """Start the probe port's server in a daemon thread of this (the master) process."""
    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # a slow client holds one thread for at most this long
        # Buffered, so an answer leaves in one write (at the flush in _send): unbuffered, the headers
        # went out before the body, and a master ending between the two (SIGTERM's last moments)
        # left a prober a status line whose body never came, not a closed connection.
        wbufsize = 1 << 16

        def do_GET(self) -> None:  # the name http.server calls
            if self.path == "/metrics":
                self._send(200, *merged_exposition())
            elif self.path == "/healthz":
                self._json(200, {"status": "ok"})
            elif self.path == "/readyz":
                self._json(*_aggregate(status_dir))
            else:
                self._json(404, {"error": "not found: this port serves /metrics, /healthz and /readyz", "status": 404})

        def do_POST(self) -> None:
            self._json(405, {"error": "admission requests go to the HTTPS port", "status": 405})

        def _json(self, code: int, body: dict[str, Any]) -> None:
            self._send(code, json.dumps(body).encode(), "application/json")

        def _send(self, code: int, payload: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every few seconds: not logged
            return

    server = _ProbeServer(host_and_port(bind), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="vgate-probes", daemon=True).start()
    return server


def _aggregate(status_dir: Path) -> tuple[int, dict[str, Any]]:
    """Ready while every live worker says so, recently, and one of them is not draining (``draining``:
    a renewal drains one worker at a time, SIGTERM all of them); the first reason otherwise. A ready answer
    names every live worker's policy revision (``policyRevisions``): after an edit, one revision
    there means every worker judges by the new set (each reloads on its own look)."""
    runtime = RuntimeDir(status_dir.parent)  # the folder whose status/ this is: its draining/ beside it
    reports, marked = [], []
    for path in sorted(status_dir.glob("*.json")):
        if not running(int(path.stem)):
            path.unlink(missing_ok=True)
            continue
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        marked.append(is_marked(runtime, int(path.stem)))
    if not reports:
        return 503, {"error": "no worker has reported ready yet", "status": 503}
    if all(marked):  # SIGTERM: a balancer that routes by this probe stops sending new connections here
        return 503, {"error": "stopping: every worker is draining its connections", "status": 503}
    for report in reports:
        if time.time() - report["written"] > STALE_SECONDS:
            return 503, {"error": "a worker has not reported for over 30 s", "status": 503}
        if report["code"] != 200:
            return report["code"], report["body"]
    revisions = sorted({str(report["body"].get("policyRevision")) for report in reports})
    return 200, {**reports[0]["body"], "policyRevisions": revisions}

