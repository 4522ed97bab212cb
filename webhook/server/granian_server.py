"""Serving with granian: TLS and HTTP/1.1 in Rust, bodies read on an event loop, one engine per worker process.

Chosen by measurement over gunicorn (README, "Serving"): gunicorn's gthread workers give a
connection a thread once its headers arrive, so as many clients dripping a body as there are
threads stop a replica; granian's workers hold thousands of slow connections on an event loop and
the app (``asgi.WsgiBehindLoop``) sees only complete bodies. TLS handshakes and headers are read
by granian itself, each within ``server.headerReadTimeoutSeconds``; bodies within
``server.bodyReadTimeoutSeconds``. HTTP/2 is not offered (like controller-runtime's webhook
servers since the HTTP/2 rapid-reset attacks); the API server speaks HTTP/1.1 to webhooks then.

Workers are processes (regorus holds the GIL). Each builds its app from the settings the master
puts in the environment (``SETTINGS_ENV``), after the master has checked config and policies.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from granian.constants import HTTPModes, Interfaces, SSLProtocols
from granian.http import HTTP1Settings
from granian.server import MPServer

from .certs import CertPaths

log = logging.getLogger("vgate")
SETTINGS_ENV = "VGATE_SERVE_SETTINGS"


@dataclass(frozen=True)
class Limits:
    """Connection limits fixed at start (a reload cannot change sockets the master holds)."""

    header_read_timeout: float = 30.0
    max_connections: int = 1024
    client_ca: str | None = None


class _ReloadingServer(MPServer):
    """SIGHUP reloads policies and config inside the running workers instead of replacing them.

    granian's own HUP respawns the workers; with a broken policy they would fail to start and take
    the server down. Touching the reload token makes every worker's watcher reload in place and
    keep its old set if the new one is invalid.
    """

    def _reload(self, spawn_target: Any, target_loader: Any) -> None:
        self.reload_signal = False
        self.main_loop_interrupt.clear()
        token = os.environ.get("VGATE_RELOAD_TOKEN")
        if token:
            log.info("SIGHUP: workers reload config and policies")
            os.utime(token)


def serve(settings: Any, bind: str, workers: int, certs: CertPaths, limits: Limits, access_log: bool = False) -> None:
    """Run granian in this process (the master) until SIGTERM or SIGINT; workers build the app."""
    os.environ[SETTINGS_ENV] = json.dumps(asdict(settings))
    host, _, port = bind.rpartition(":")
    server = _ReloadingServer(
        "webhook.server.wiring:asgi_app_from_environment",
        factory=True,
        address=host.strip("[]") or "0.0.0.0",
        port=int(port),
        interface=Interfaces.ASGINL,
        workers=workers,
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(header_read_timeout=int(limits.header_read_timeout * 1000), keep_alive=True),
        backlog=max(1024, limits.max_connections),
        backpressure=limits.max_connections,
        websockets=False,
        ssl_cert=Path(certs.cert),
        ssl_key=Path(certs.key),
        ssl_protocol_min=SSLProtocols.tls12,
        ssl_ca=Path(limits.client_ca) if limits.client_ca else None,
        ssl_client_verify=bool(limits.client_ca),
        log_access=access_log,
        respawn_failed_workers=True,
        workers_kill_timeout=20,  # graceful shutdown: requests in flight get this long to finish
    )
    server.serve()
