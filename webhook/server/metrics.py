"""Prometheus metrics (prometheus-client): one Metrics object per app, shared by every gunicorn worker.

The app factory creates the Metrics its gateway, reloader and /metrics use, so tests and
embedders can build as many apps as they like in one process (each with its own registry).
gunicorn runs several worker processes: `vgate serve` points PROMETHEUS_MULTIPROC_DIR at a fresh
directory before anything imports prometheus_client (the client chooses how to store values when
it is imported), and /metrics then merges every worker's samples. Without that variable (tests,
`vgate eval`) the object's own registry is exposed.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)


class Metrics:
    """Every metric vgate exposes, registered in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "vgate_admission_requests_total", "Admission requests answered, by endpoint, kind, operation and decision.",
            ["endpoint", "kind", "operation", "decision", "dry_run"], registry=self.registry)
        self.latency = Histogram(
            "vgate_admission_duration_seconds", "Time from request body to response, by endpoint.",
            ["endpoint"], buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry)
        self.violations = Counter(
            "vgate_policy_violations_total", "Rule results, by rule id and action (deny, warn, audit, excepted).",
            ["rule", "action"], registry=self.registry)
        self.errors = Counter(
            "vgate_errors_total",
            "Requests that failed: bad input, evaluation or mutation errors, audit write failures.",
            ["endpoint", "reason"], registry=self.registry)
        self.evaluations = Counter(
            "vgate_policy_evaluations_total",
            "Policy evaluations, by the engine that answered: rvm; interpreter for what the RVM cannot compile or "
            "answer (instruction budget); opa.", ["engine"], registry=self.registry)
        self.reloads = Counter(
            "vgate_reloads_total", "Reloads of config and policies (SIGHUP or a changed file), by result.", ["result"],
            registry=self.registry)
        self.reload_ok = Gauge(
            "vgate_config_last_reload_successful",
            "1 if every worker's last reload succeeded (0: an old set is serving).",
            multiprocess_mode="min", registry=self.registry)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition of every worker's metrics, and its content type."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            merged = CollectorRegistry()
            multiprocess.MultiProcessCollector(merged)
            return generate_latest(merged), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
