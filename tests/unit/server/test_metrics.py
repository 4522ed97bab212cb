"""The request path's metrics keep each label set's child after its first call: counts stay per label set."""

from __future__ import annotations

import re

from webhook.server.metrics import Metrics


def samples(metrics: Metrics, name: str) -> dict[str, float]:
    text = metrics.exposition()[0].decode()
    return {labels: float(value) for labels, value in re.findall(rf"^{name}{{(.*)}} (\S+)$", text, re.MULTILINE)}


def test_each_label_set_counts_apart_however_late_the_labels_differ() -> None:
    metrics = Metrics()
    calls = {("validate", "Pod", "CREATE", "allowed", "false"): 3, ("validate", "Pod", "CREATE", "allowed", "true"): 2,
             ("validate", "Pod", "CREATE", "denied", "false"): 1, ("mutate", "Pod", "CREATE", "allowed", "false"): 4}
    for values, times in calls.items():
        for _ in range(times):
            metrics.requests.labels(*values).inc()
    for endpoint, seconds in (("validate", 0.002), ("validate", 0.3), ("mutate", 0.001)):
        metrics.latency.labels(endpoint).observe(seconds)
    found = samples(metrics, "vgate_admission_requests_total")
    assert found == {f'decision="{d}",dry_run="{r}",endpoint="{e}",kind="{k}",operation="{o}"': float(n)
                     for (e, k, o, d, r), n in calls.items()}
    counts = samples(metrics, "vgate_admission_duration_seconds_count")
    assert counts == {'endpoint="mutate"': 1.0, 'endpoint="validate"': 2.0}
    assert metrics.violations.labels("a", "deny") is metrics.violations.labels("a", "deny")
    assert Metrics().requests.labels(*next(iter(calls))) is not metrics.requests.labels(*next(iter(calls)))
