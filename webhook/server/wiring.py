"""Wiring: how a worker's parts are built from the command line's settings, in one place.

``load_gateway`` reads and compiles everything a gateway needs (config, policies, exceptions, the
decision log); ``build_app`` is the app factory of one gunicorn worker: its metrics, its gateway
(reloaded in place when files change), its report scheduler, its Flask app. `vgate serve` checks
``load_gateway`` once in the master before forking, so an invalid file stops start-up.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from flask import Flask

from ..audit.log import DecisionLog
from ..core.config import load_config
from ..core.contract import PolicyEngine
from ..core.policy_exceptions import ExceptionRules, load_exceptions
from ..policy.opa import OpaEngine
from ..policy.regorus_engine import RegorusEngine
from ..policy.sources import load_policy_set
from ..reports.schedule import ReportScheduler
from .app import create_app
from .gateway import Gateway
from .metrics import Metrics
from .reload import LiveGateway

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


def load_gateway(settings: Settings, metrics: Metrics, *, audit: bool = True) -> Gateway:
    """Load and compile everything; raises ConfigError/PolicyError naming file and line.

    The policies are compiled in process even when ``opa_url`` sends evaluation to OPA: that
    checks the files OPA is meant to serve and gives the revision every decision records.
    """
    config = load_config(settings.config_path)
    policy_set = load_policy_set(settings.policy_dir)
    engine: PolicyEngine = RegorusEngine(policy_set, config.document)
    if settings.opa_url:
        engine = OpaEngine(settings.opa_url, policy_set, config.document, settings.opa_timeout)
    decisions = DecisionLog(config.document["audit"]["dir"]) if audit else None
    exception_rules = ExceptionRules.of(config.document["exceptions"], datetime.now(timezone.utc))
    exceptions, rejected = load_exceptions(config.document["exceptions"]["dir"], exception_rules)
    for error in rejected:
        log.error("policy exception rejected: %s", error)
        metrics.errors.labels("load", "exception_file").inc()
    return Gateway(config, engine, decisions, exceptions, Path(settings.policy_dir), metrics)


def build_app(settings: Settings) -> Flask:
    """One worker's app: metrics, a live gateway watching its files, the hourly reports."""
    metrics = Metrics()
    live = LiveGateway(lambda: load_gateway(settings, metrics), metrics)
    live.watch(settings.reload_interval)
    if settings.hourly_reports:
        ReportScheduler(lambda: live.current.config.document, lambda: live.current.policy_dir).run_forever()
    log.info("worker %d ready: policy revision %s", os.getpid(), live.current.revision)
    return create_app(live, metrics)
