"""Serving with gunicorn: TLS, gthread workers (keep-alive), one engine per worker process.

gunicorn's default sync worker closes the connection after each request, so behind TLS every
request would pay a handshake; gthread keeps connections alive. regorus holds the GIL, so
evaluation scales with processes (``workers``), not threads; threads only multiplex I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter

from .certs import CertPaths
from .reload import touch_reload_token
from .runtime import metrics_dir


class _ReloadingArbiter(Arbiter):
    """SIGHUP reloads policies and config inside the running workers instead of replacing them.

    gunicorn's own HUP starts new workers; with a broken policy they would fail to boot and take
    the server down. Touching the reload token makes every worker's watcher reload in place and
    keep its old set if the new one is invalid.
    """

    def handle_hup(self) -> None:
        if touch_reload_token():
            self.log.info("SIGHUP: workers reload config and policies")


@dataclass(frozen=True)
class ServeOptions:
    bind: str
    workers: int
    threads: int
    certs: CertPaths
    access_log: bool = False


class VgateServer(BaseApplication):
    """A gunicorn application whose workers each build their own app with ``factory``."""

    def __init__(self, factory: Callable[[], Any], options: ServeOptions) -> None:
        self._factory = factory
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        options = self._options
        settings = {
            "bind": [options.bind],
            "workers": options.workers,
            "worker_class": "gthread",
            "threads": options.threads,
            "keepalive": 75,  # the API server reuses connections; keep them longer than its idle timeout
            "timeout": 30,
            "graceful_timeout": 20,
            "certfile": str(options.certs.cert),
            "keyfile": str(options.certs.key),
            "accesslog": "-" if options.access_log else None,
            "errorlog": "-",
            "loglevel": "info",
            "child_exit": _mark_worker_dead,
            "proc_name": "vgate",
            "control_socket_disable": True,  # no ~/.gunicorn socket: the image runs read-only as non-root
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self._factory()

    def run(self) -> None:
        _ReloadingArbiter(self).run()


def _mark_worker_dead(server: Any, worker: Any) -> None:
    """Drop a dead worker's live metrics from the multiprocess directory."""
    if metrics_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
