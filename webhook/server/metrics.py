"""Prometheus metrics (prometheus-client): one Metrics object per app, merged over every worker process.

The app factory creates the Metrics its gateway, reloader and /metrics use, so tests and
embedders can build as many apps as they like in one process (each with its own registry).
`vgate serve` runs several worker processes: it points PROMETHEUS_MULTIPROC_DIR at a fresh
directory before anything imports prometheus_client (the client chooses how to store values when
it is imported), and /metrics then merges every worker's samples. Gauges count live processes
only: the master forgets its own after its start-up check, and each worker, when it starts,
forgets those of processes that have exited (a respawned worker's, the master's after a crash).
Without that variable (tests, `vgate eval`) the object's own registry is exposed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics import MetricWrapperBase

from ..forward.forwarder import Counters
from .runtime import metrics_dir


class Metrics:
    """Every metric vgate exposes, registered in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "vgate_admission_requests_total", "Admission requests answered, by endpoint, kind, operation and decision.",
            ["endpoint", "kind", "operation", "decision", "dry_run"], registry=self.registry)
        self.latency = Histogram(
            "vgate_admission_duration_seconds", "Time from request body to response, by endpoint.",
            ["endpoint"], buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=self.registry)
        self.request_bytes = Counter(
            "vgate_admission_request_bytes_total", "AdmissionReview bytes received, by endpoint (per request: "
            "divide by vgate_admission_requests_total).", ["endpoint"], registry=self.registry)
        self.patch_bytes = Counter(
            "vgate_admission_patch_bytes_total", "JSON Patch bytes answered by /mutate, base64 as sent.",
            registry=self.registry)
        self.violations = Counter(
            "vgate_policy_violations_total", "Rule results, by rule id and action (deny, warn, audit, excepted).",
            ["rule", "action"], registry=self.registry)
        self.drift = Counter(
            "vgate_drift_total",
            "Sensitive pods whose node's placement facts an admin changed under them (encryption, zone, tenant "
            "taint), by what changed: encryption, zone, taint.", ["what"], registry=self.registry)
        for what in ("encryption", "zone", "taint"):  # at 0 from the start: increase() sees the first one
            self.drift.labels(what)
        self.errors = Counter(
            "vgate_errors_total",
            "Requests that failed: bad input, evaluation or mutation errors, audit write failures.",
            ["endpoint", "reason"], registry=self.registry)
        self.evaluations = Counter(
            "vgate_policy_evaluations_total",
            "Policy evaluations, by the engine that answered: rvm; interpreter for what the RVM cannot compile or "
            "answer (instruction budget); opa.", ["engine"], registry=self.registry)
        for per_request in (self.requests, self.latency, self.request_bytes, self.violations, self.errors,
                            self.evaluations):
            _keep_children(per_request)
        self.reloads = Counter(
            "vgate_reloads_total", "Reloads of config and policies (SIGHUP or a changed file), by result.", ["result"],
            registry=self.registry)
        self.reload_ok = Gauge(
            "vgate_config_last_reload_successful",
            "1 if every worker's last reload succeeded (0: an old set is serving).",
            multiprocess_mode="livemin", registry=self.registry)
        # 1 from the start: a worker still loading has had no reload fail, and the multiprocess value
        # would otherwise read 0 until its first load ends (the minimum then said 0 for a healthy server).
        self.reload_ok.set(1)
        self.cluster_synced = Gauge(
            "vgate_cluster_cache_synced", "1 once every worker has listed the kind (cluster.watch).",
            ["kind"], multiprocess_mode="livemin", registry=self.registry)
        self.cluster_objects = Gauge(
            "vgate_cluster_cache_objects", "Objects of the kind the cluster state holds (each worker's, the largest).",
            ["kind"], multiprocess_mode="livemax", registry=self.registry)
        self.cluster_age = Gauge(
            "vgate_cluster_cache_contact_age_seconds",
            "Seconds since the API server last answered the kind's list or watch (bookmarks included); "
            "the oldest of every worker's.", ["kind"], multiprocess_mode="livemax", registry=self.registry)

        self.certificate_expiry = Gauge(
            "vgate_tls_certificate_expiry_timestamp_seconds",
            "When the serving certificate the workers present expires (Unix time); renewals are picked up live.",
            multiprocess_mode="livemin", registry=self.registry)

        # audit.forward: set by the one process that delivers (the others' stay 0; livemax takes its)
        self.forward_records = Counter(
            "vgate_forward_records_total",
            "Decision records sent to the audit system, by result: delivered (acknowledged, or accepted and kept "
            "open for the settle time), oversize (sent as a placeholder with their sha256).", ["result"],
            registry=self.registry)
        self.forward_failures = Counter(
            "vgate_forward_failures_total", "Connections to the audit system that failed or broke (each is retried "
            "from the saved cursor).", registry=self.registry)
        self.forward_backlog_records = Gauge(
            "vgate_forward_backlog_records", "Records in the decision log the audit system does not have yet.",
            multiprocess_mode="livemax", registry=self.registry)
        self.forward_backlog_bytes = Gauge(
            "vgate_forward_backlog_bytes", "Bytes of the decision log the audit system does not have yet.",
            multiprocess_mode="livemax", registry=self.registry)
        self.forward_oldest = Gauge(
            "vgate_forward_oldest_undelivered_timestamp_seconds",
            "When the oldest record the audit system does not have was decided (Unix time; 0: it has them all).",
            multiprocess_mode="livemax", registry=self.registry)
        self._forwarded = (0, 0, 0)  # delivered, oversize, failures already counted

    def observe_forwarding(self, counters: Counters) -> None:
        """The forwarder's running totals and backlog as metrics (its ``observe`` hook)."""
        done, big, failed = self._forwarded
        self.forward_records.labels("delivered").inc(max(counters.delivered - done, 0))
        self.forward_records.labels("oversize").inc(max(counters.oversize - big, 0))
        self.forward_failures.inc(max(counters.failures - failed, 0))
        self._forwarded = (max(counters.delivered, done), max(counters.oversize, big), max(counters.failures, failed))
        self.forward_backlog_records.set(counters.backlog_records)
        self.forward_backlog_bytes.set(counters.backlog_bytes)
        self.forward_oldest.set(counters.oldest_undelivered)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition of every worker's metrics, and its content type."""
        if metrics_dir():
            return merged_exposition()
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _keep_children(metric: MetricWrapperBase) -> None:
    """``metric.labels(*values)`` answered from a table after each label set's first call.

    prometheus_client's ``labels`` checks, converts and locks on every call (~2 µs), and a request
    calls it five to eight times. A child is never removed from these metrics, so the table never
    holds one the metric has dropped."""
    children: dict[tuple[str, ...], Any] = {}
    find = metric.labels

    def labels(*values: str) -> Any:
        child = children.get(values)
        if child is None:
            child = children[values] = find(*values)
        return child

    metric.labels = labels  # type: ignore[method-assign, assignment]  # this one object's, not its class's


def merged_exposition() -> tuple[bytes, str]:
    """Every process's samples from the multiprocess directory, as one exposition, and its content type."""
    merged = CollectorRegistry()
    multiprocess.MultiProcessCollector(merged)
    return generate_latest(merged), CONTENT_TYPE_LATEST


def forget_dead_workers() -> None:
    """Drop the live gauges of processes that no longer run from the multiprocess directory."""
    directory = metrics_dir()
    if not directory:
        return
    pids = {int(m.group(1)) for f in Path(directory).glob("*_live*_*.db") if (m := re.search(r"_(\d+)\.db$", f.name))}
    for pid in pids:
        if not running(pid):
            multiprocess.mark_process_dead(pid, directory)


def forget_this_process() -> None:
    """Drop this process's live gauges (the master's, after its start-up check built a gateway)."""
    if metrics_dir():
        multiprocess.mark_process_dead(os.getpid())


def running(pid: int) -> bool:
    """Whether a process with this pid exists (one another user owns counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
