"""Serving with granian: TLS and HTTP/1.1 in Rust, bodies read on an event loop, one engine per worker process.

Chosen by measurement over gunicorn (docs/operators.md, "Serving"): gunicorn's gthread workers give a
connection a thread once its headers arrive, so as many clients dripping a body as there are
threads stop a replica; granian's workers hold thousands of slow connections on an event loop and
the app (``asgi.AdmissionServer``) sees only complete bodies. TLS handshakes and headers are read
by granian itself, each within ``server.headerReadTimeoutSeconds``; bodies within
``server.bodyReadTimeoutSeconds``. HTTP/2 is not offered (like controller-runtime's webhook
servers since the HTTP/2 rapid-reset attacks); the API server speaks HTTP/1.1 to webhooks then.

Workers are processes (regorus holds the GIL). Each builds its app from the settings the master
writes into the runtime directory (``runtime.RuntimeDir``), after the master has checked config and policies.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from multiprocessing.connection import wait as wait_for_ready
from pathlib import Path
from typing import Any

from granian.constants import HTTPModes, Interfaces, Loops, SSLProtocols
from granian.http import HTTP1Settings
from granian.server import MPServer

from .certs import CertPaths
from .draining import DRAIN_SECONDS, RESPAWN_SECONDS, marked
from .log_format import granian_logging
from .periodic import every
from .reload import touch_reload_token
from .runtime import RuntimeDir
from .serving_pair import ServingPair

log = logging.getLogger("vgate")


@dataclass(frozen=True)
class Limits:
    """Connection limits fixed at start (a reload cannot change sockets the master holds)."""

    header_read_timeout: float = 30.0
    max_connections: int = 1024
    client_ca: str | None = None


class _PolledEvent(threading.Event):
    """The master's main-loop event, waited for by sleeping and looking every ``LOOK_SECONDS``.

    A SIGINT or SIGTERM the kernel hands to another of the master's threads (the probe port's, a
    watcher's) runs its Python handler only once the main thread runs Python code again; blocked on
    a lock with no timeout (granian's wait) it never did, and the signal was lost (1 of 25 SIGINTs
    while /readyz was polled). A sleep holds no lock, so the handler, which sets this event, may
    run inside it or right after it.
    """

    LOOK_SECONDS = 0.2

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            return super().wait(timeout)
        while not self.is_set():
            time.sleep(self.LOOK_SECONDS)
        return True


class _ReloadingServer(MPServer):
    """SIGHUP reloads policies and config inside the running workers instead of replacing them.

    granian's own HUP respawns the workers; with a broken policy they would fail to start and take
    the server down. Touching the reload token makes every worker's watcher reload in place and
    keep its old set if the new one is invalid. A renewed certificate is the one case where the
    workers are replaced (one by one): TLS is set up when a worker starts.
    """

    renew_tls = False
    drain_on_stop = False
    runtime: RuntimeDir  # set by serve()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.main_loop_interrupt = _PolledEvent()

    def signal_handler_interrupt(self, *args: Any, **kwargs: Any) -> None:
        """SIGTERM (a pod deleted, a rolling update) drains the workers before they stop; SIGINT does not."""
        self.drain_on_stop = bool(args) and args[0] == signal.SIGTERM
        super().signal_handler_interrupt(*args, **kwargs)

    def _stop_workers(self) -> None:
        """On SIGTERM, mark every worker for ``DRAIN_SECONDS`` first: the API server's connections then
        move to another replica (the Service's other endpoints) before these close."""
        with ExitStack() as marks:
            if self.drain_on_stop:
                for worker in self.wrks:
                    marks.enter_context(marked(self.runtime, worker.inner.pid))
                log.info("SIGTERM: answering with Connection: close for %ss before the workers stop", DRAIN_SECONDS)
                time.sleep(DRAIN_SECONDS)
            super()._stop_workers()

    def respawn_for_new_certificate(self) -> None:
        self.renew_tls = True
        self.reload_signal = True
        self.main_loop_interrupt.set()

    def _reload(self, spawn_target: Any, target_loader: Any) -> None:
        self.reload_signal = False
        self.main_loop_interrupt.clear()
        if self.renew_tls:
            self.renew_tls = False
            log.info("a new serving certificate: replacing the workers one by one")
            self._replace_each_worker(spawn_target, target_loader)
        elif touch_reload_token():
            log.info("SIGHUP: workers reload config and policies")

    def _replace_each_worker(self, spawn_target: Any, target_loader: Any) -> None:
        """Start a new worker, give it granian's ``respawn_interval`` to come up, then mark the old one
        (``draining``) so its clients move off it, and only then stop it; one worker at a time.

        granian's own respawn stops the old worker at once, cutting requests written to its idle
        connections in that instant (``bench/rotation.py``).
        """
        for idx, old in enumerate(list(self.wrks)):
            self.respawned_wrks[idx] = time.monotonic()
            new = self._spawn_worker(idx=idx, target=spawn_target, callback_loader=target_loader)
            new.start()
            self.wrks[idx] = new
            time.sleep(self.respawn_interval)
            with marked(self.runtime, old.inner.pid):
                time.sleep(DRAIN_SECONDS)
                old.terminate()
                if not _exits_within(old, self.workers_kill_timeout):
                    log.warning("worker-%d did not stop in %ss: killed", idx + 1, self.workers_kill_timeout)
                    old.kill()
                    old.join()
            log.info("Stopped old worker-%d", idx + 1)  # granian's words, which tests wait for
        self._metrics.incr_spawn(len(self.wrks))


def _exits_within(worker: Any, timeout: float | None) -> bool:
    """Whether ``worker``'s process ends within ``timeout`` seconds. Its sentinel says so; ``join`` and
    ``is_alive`` may not: granian's watcher thread reaps the same process, and the one that loses the
    race sees it alive a moment after it exited (then killed an exited worker's pid)."""
    return bool(wait_for_ready([worker.inner.sentinel], timeout))


def serve(runtime: RuntimeDir, settings: Any, bind: str, workers: int, certs: CertPaths, limits: Limits,
          access_log: bool = False, log_format: str = "text") -> None:
    """Run granian in this process (the master) until SIGTERM or SIGINT; workers build the app.

    Workers load the verified copy of the certificate pair (``ServingPair``); a watcher renews it.
    """
    runtime.write_settings(asdict(settings))
    pair = ServingPair(certs, runtime.tls)
    host, port = host_and_port(bind)
    direct = settings.direct
    server = _ReloadingServer(
        "webhook.server.wiring:" + ("asgi_app_from_environment" if direct else "wsgi_app_from_environment"),
        factory=True,
        address=host,
        port=port,
        interface=Interfaces.ASGINL if direct else Interfaces.WSGI,
        workers=workers,
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(header_read_timeout=int(limits.header_read_timeout * 1000), keep_alive=True),
        backlog=max(1024, limits.max_connections),
        backpressure=limits.max_connections,
        websockets=False,
        # uvloop, named rather than left to granian's "auto" (which takes whichever loop package is
        # installed, rloop first): measured 0.66x the CPU of asyncio's loop per /healthz, 0.94x per
        # /mutate, 0.97x per /validate, mostly its cheaper wake-up when an app thread hands an answer back.
        loop=Loops.uvloop,
        ssl_cert=pair.served.cert,
        ssl_key=pair.served.key,
        ssl_protocol_min=SSLProtocols.tls12,
        ssl_ca=Path(limits.client_ca) if limits.client_ca else None,
        ssl_client_verify=bool(limits.client_ca),
        log_access=access_log,
        log_dictconfig=granian_logging(log_format),
        respawn_failed_workers=True,
        respawn_interval=RESPAWN_SECONDS,
        workers_kill_timeout=20,  # graceful shutdown: requests in flight get this long to finish
    )
    server.runtime = runtime
    _watch_certificate(pair, server, settings.reload_interval)
    server.serve()


def host_and_port(bind: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8443`` too; an empty host is every address) as a host and a port."""
    host, _, port = bind.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


def _watch_certificate(pair: ServingPair, server: _ReloadingServer, interval: float) -> None:
    def look() -> None:
        if pair.refresh():
            server.respawn_for_new_certificate()

    every(interval, look, "vgate-certificate")
