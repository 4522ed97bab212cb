"""Prometheus metrics (prometheus-client), shared by every gunicorn worker.

gunicorn runs several worker processes, so `vgate serve` points PROMETHEUS_MULTIPROC_DIR at
a fresh directory before any worker imports prometheus_client; /metrics then merges every
worker's samples. Without that variable (tests, `vgate eval`) the process registry is used.
"""

from __future__ import annotations

import os

from prometheus_client import (CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram,
                               generate_latest, multiprocess)

REQUESTS = Counter(
    "vgate_admission_requests_total", "Admission requests answered, by endpoint, kind, operation and decision.",
    ["endpoint", "kind", "operation", "decision", "dry_run"],
)
LATENCY = Histogram(
    "vgate_admission_duration_seconds", "Time from request body to response, by endpoint.",
    ["endpoint"], buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
VIOLATIONS = Counter(
    "vgate_policy_violations_total", "Rule results, by rule id and action (deny, warn, audit, excepted).",
    ["rule", "action"],
)
ERRORS = Counter(
    "vgate_errors_total", "Requests that failed: bad input, evaluation or mutation errors, audit write failures.",
    ["endpoint", "reason"],
)
EVALUATIONS = Counter(
    "vgate_policy_evaluations_total",
    "In-process policy evaluations, by the regorus engine that answered: rvm, or interpreter for what the RVM "
    "cannot compile or answer (instruction budget).",
    ["engine"],
)

RELOADS = Counter(
    "vgate_reloads_total", "Reloads of config and policies (SIGHUP or a changed file), by result.", ["result"],
)
RELOAD_OK = Gauge(
    "vgate_config_last_reload_successful", "1 if every worker's last reload succeeded (0: an old set is serving).",
    multiprocess_mode="min",
)


def exposition() -> tuple[bytes, str]:
    """The text exposition of every worker's metrics, and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
