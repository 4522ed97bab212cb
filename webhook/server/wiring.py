"""Wiring: how a worker's parts are built from the command line's settings, in one place.

``load_gateway`` reads and compiles everything a gateway needs (config, policies, exceptions, the
decision log); ``build_worker`` builds one worker's parts: its metrics, its gateway (reloaded in
place when files change), its report scheduler, its endpoint table; ``asgi_app_from_environment``
is the app factory of one granian worker (``wsgi_app_from_environment`` under ``--server
granian-flask``, the Flask adapter kept for comparison). `vgate serve` checks ``load_gateway`` once in the master
before the workers start, so an invalid file stops start-up.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from flask import Flask

from ..audit.log import DecisionLog
from ..cluster.api import ApiServer
from ..cluster.state import ClusterState
from ..core.config import ClusterSettings
from ..core.contract import PolicyEngine
from ..files.config_file import load_config
from ..files.exception_files import load_configured_exceptions
from ..forward.forwarder import Forwarder
from ..policy.isolated import IsolatedEngine
from ..policy.opa import OpaEngine
from ..policy.parent_death import die_with_parent
from ..policy.sources import load_policy_set
from ..reports.anchor_place import anchor_path
from ..reports.schedule import ReportScheduler
from .asgi import AdmissionServer
from .certs import CertPaths, expires_at
from .draining import watch_for_mark
from .endpoints import Endpoints
from .flask_adapter import create_app
from .gateway import Gateway
from .heartbeat import start_heartbeats
from .metrics import Metrics, forget_dead_workers
from .periodic import every
from .probe_port import write_status
from .reload import LiveGateway
from .runtime import RUNTIME_DIR_ENV, RuntimeDir

log = logging.getLogger("vgate")


@dataclass(frozen=True)
class Settings:
    """What `vgate serve` was asked to serve."""

    config_path: str | None
    policy_dir: str
    opa_url: str | None = None
    opa_timeout: float = 2.0
    reload_interval: float = 2.0
    hourly_reports: bool = True
    app_threads: int = 1
    direct: bool = True  # the ASGI serving path (False: `--server granian-flask`, Flask over granian's WSGI)


def load_gateway(settings: Settings, metrics: Metrics, *, audit: bool = True,
                 cluster: ClusterState | None = None) -> Gateway:
    """Load and compile everything; raises ConfigError/PolicyError naming file and line (ConfigError
    too when this process writes the hourly reports and the anchor sits with the evidence).

    The policies are compiled (in the evaluator child, within the load budget) even when
    ``opa_url`` sends evaluation to OPA: that checks the files OPA is meant to serve and gives the
    revision every decision records.
    """
    config = load_config(settings.config_path)
    if settings.hourly_reports:  # this process signs reports: never with an anchor the evidence's writers reach
        anchor_path(config)
    policy_set = load_policy_set(settings.policy_dir)
    server = config.server
    isolated = IsolatedEngine(policy_set, config.document, timeout=server.evaluation_timeout_seconds,
                              load_budget=server.policy_load_timeout_seconds)
    engine: PolicyEngine = isolated
    if settings.opa_url:
        isolated.close()
        engine = OpaEngine(settings.opa_url, policy_set, config.document, settings.opa_timeout)
    if cluster is not None:  # policies read the cluster state as data.inventory
        isolated.inventory = cluster.versioned_inventory
        if isinstance(engine, OpaEngine):
            engine.inventory = cluster.versioned_inventory
    mirror = sys.stdout.fileno() if config.audit.mirror_to_stdout else None
    decisions = DecisionLog(config.audit.dir, mirror_fd=mirror) if audit else None
    if decisions is not None and (reason := decisions.unwritable()):
        # unready from the start (a volume of another uid, no fsGroup, read-only, full): a replica that
        # first reported ready would take requests only to refuse them unrecorded
        log.error("cannot write the decision log in %s (%s): it must be writable by uid %d gid %d (in the "
                  "chart, the pod's fsGroup); not ready until it is", config.audit.dir, reason, os.getuid(),
                  os.getgid())
        decisions.failure_balance = config.audit.unready_after_failures
    exceptions, rejected = load_configured_exceptions(config.exceptions, datetime.now(timezone.utc))
    for error in rejected:
        log.error("policy exception rejected: %s", error)
        metrics.errors.labels("load", "exception_file").inc()
    return Gateway(config, engine, decisions, exceptions, Path(settings.policy_dir), metrics, cluster)


def build_worker(settings: Settings) -> tuple[Endpoints, LiveGateway]:
    """One worker's endpoint table and the live gateway behind it: metrics, files watched, the hourly reports."""
    forget_dead_workers()
    metrics = Metrics()
    runtime = RuntimeDir.current()
    served = CertPaths.under(runtime.tls).cert if runtime else None
    if served is not None and served.is_file():
        metrics.certificate_expiry.set(expires_at(served.read_bytes()).timestamp())
    cluster = watch_cluster(load_config(settings.config_path).cluster)
    live = LiveGateway(lambda: load_gateway(settings, metrics, cluster=cluster), metrics)
    live.watch(settings.reload_interval)
    if runtime is not None:
        watch_for_mark(runtime)
    start_heartbeats(live)
    probe_port = runtime is not None and runtime.probes_served
    # the master serves /readyz on the probe port from these reports; each checks the evaluator child
    write_status(live)
    every(min(settings.reload_interval, 5.0), lambda: write_status(live), "vgate-status")
    if settings.hourly_reports:
        ReportScheduler(lambda: live.current.config, lambda: live.current.policy_dir).run_forever()
    audit = live.current.config.audit
    if audit.forward.url:  # read at start; one process of all replicas delivers (the volume's lock)
        Forwarder(audit.forward, audit.dir, observe=metrics.observe_forwarding).run_forever()
    log.info("worker %d ready: policy revision %s", os.getpid(), live.current.revision)
    return Endpoints(live, metrics, probes=not probe_port), live


def watch_cluster(settings: ClusterSettings) -> ClusterState | None:
    """This worker's cluster state, watching from now on; None without ``cluster.watch``.

    Read at start, like the server's connection settings: a reload does not start or stop watching.
    """
    if not settings.watch:
        return None
    state = ClusterState(lambda: ApiServer.connect(settings.kubeconfig),
                         watch_seconds=settings.watch_seconds)
    state.start()
    return state


def build_app(settings: Settings) -> Flask:
    """One worker's table behind Flask (gunicorn, ``--server granian-flask``, embedders' WSGI servers)."""
    endpoints, live = build_worker(settings)
    return create_app(live, endpoints.metrics, probes=endpoints.probes)


def asgi_app_from_environment() -> AdmissionServer:
    """The app factory granian calls in each worker: the endpoint table behind the body-reading event loop."""
    settings = _settings_from_runtime()
    return AdmissionServer(build_worker(settings)[0], settings.app_threads)


def wsgi_app_from_environment() -> Flask:
    """The app factory granian calls in each worker under ``--server granian-flask``."""
    return build_app(_settings_from_runtime())


def _settings_from_runtime() -> Settings:
    """A granian worker's settings, from the folder its master wrote; the worker dies with the master."""
    master = multiprocessing.parent_process()
    die_with_parent(master.pid if master is not None else None)
    runtime = RuntimeDir.current()
    if runtime is None:
        raise RuntimeError(f"{RUNTIME_DIR_ENV} is not set: granian's workers are started by `vgate serve`")
    return Settings(**runtime.settings())
