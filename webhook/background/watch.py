"""`vgate audit scan --watch`: the background audit as a process of its own, never on the admission path.

It scans the cluster (``scan.run_scan``) at start, every ``audit.backgroundInterval`` (or
``--every``), and as soon as the policies or the config it reads change (a ConfigMap update
projected into its volume: the same files the webhook reloads); it publishes each scan's findings
as the cluster's ``vgate-audit`` policy reports (``scan_reports``) and as metrics per rule and
namespace. One replica runs it (the chart's report writer pattern: a single writer, so two never
publish the same reports). A scan that fails (the API server away) is logged, counted and tried
again at the next poll, and the reports of the last good scan stay.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import requests
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from ..cluster.api import ApiServer
from ..core.errors import InputError, SourceError
from ..files.config_file import load_config
from ..policy.sources import load_policy_set, rule_catalogue
from ..reports.cluster_reports import publish_reports
from .policy_reports import NAME, scan_reports
from .scan import Scan, run_scan

log = logging.getLogger("vgate")
POLL_SECONDS = 5.0
DURATION = re.compile(r"^(\d+)([smh])$")


def seconds_of(duration: str) -> float:
    """``90s``, ``15m``, ``1h``: the config's and --every's durations."""
    found = DURATION.match(duration.strip())
    if not found:
        raise ValueError(f"{duration!r} is not a duration like 90s, 15m or 1h")
    return int(found.group(1)) * {"s": 1, "m": 60, "h": 3600}[found.group(2)]


class ScanMetrics:
    """What each scan found, per rule, action and namespace, and what it cost."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.violations = Gauge("vgate_audit_violations", "Objects the last scan found a rule saying something of",
                                ["rule", "action", "namespace"], registry=self.registry)
        self.objects = Gauge("vgate_audit_objects", "Objects the last scan judged (exempt ones apart)",
                             registry=self.registry)
        self.errors = Gauge("vgate_audit_errors", "Objects the last scan could not evaluate", registry=self.registry)
        self.cpu = Gauge("vgate_audit_cpu_seconds_per_object", "CPU per object judged in the last scan",
                         registry=self.registry)
        self.finished = Gauge("vgate_audit_last_scan_timestamp_seconds", "When the last scan finished",
                              registry=self.registry)
        self.failures = Counter("vgate_audit_scan_failures", "Scans that could not run (the cluster not readable)",
                                registry=self.registry)

    def record(self, scan: Scan) -> None:
        self.violations.clear()
        for (rule, action, namespace), count in scan.per_rule().items():
            self.violations.labels(rule, action, namespace).set(count)
        summary = scan.summary()
        self.objects.set(summary["judged"])
        self.errors.set(summary["errors"])
        self.cpu.set((summary["cpuMicrosecondsPerObject"] or 0) / 1e6)
        self.finished.set(time.time())


def sources_digest(config_path: str | None, policy_dir: str) -> str:
    """What a reload would change: the policies' revision and the config file's bytes."""
    digest = hashlib.sha256(load_policy_set(policy_dir).revision.encode())
    if config_path:
        digest.update(Path(config_path).read_bytes())
    return digest.hexdigest()


def watch_scans(kubeconfig: str | None, config_path: str | None, policy_dir: str, every: str | None, publish: bool,
                metrics: ScanMetrics, stop: threading.Event,
                connect: Callable[[], ApiServer] | None = None) -> None:
    """Scan, publish and record until ``stop``: at start, on schedule, and on every change of the
    policies or the config."""
    def api() -> ApiServer:
        return connect() if connect else ApiServer.connect(kubeconfig)
    seen, due = "", 0.0
    while not stop.is_set():
        try:
            current = sources_digest(config_path, policy_dir)
            if current != seen or time.monotonic() >= due:
                why = "start" if not seen else ("schedule" if current == seen else "policies or config changed")
                result, _ = run_scan(kubeconfig, config_path, policy_dir, datetime.now(timezone.utc), connect)
                metrics.record(result)
                if publish:
                    namespaced, cluster = scan_reports(result, rule_catalogue(policy_dir))
                    with api() as server:
                        publish_reports(server, namespaced, cluster, NAME, "in this scan")
                summary = result.summary()
                log.info("audit scan (%s): %s objects judged, %s denied, %s errors, %s µs CPU per object",
                         why, summary["judged"], summary["denied"], summary["errors"],
                         summary["cpuMicrosecondsPerObject"])
                interval = every or load_config(config_path).audit.background_interval
                seen, due = current, time.monotonic() + seconds_of(interval)
        except (InputError, SourceError, OSError, ValueError, requests.RequestException) as error:
            metrics.failures.inc()
            log.warning("audit scan failed: %s; trying again in %.0f s", error, POLL_SECONDS)
        stop.wait(POLL_SECONDS)


def serve_metrics(metrics: ScanMetrics, bind: str) -> None:
    host, _, port = bind.rpartition(":")
    start_http_server(int(port), host or "0.0.0.0", registry=metrics.registry)
