"""Which Volcano queue a workload belongs to.

Order, first match wins: the queue the user named (kept; /validate judges whether the namespace
may use it), the namespace's queue, the first label selector that matches, the default queue.
"""

from __future__ import annotations

from collections.abc import Mapping

from .config import Config
from .workloads import selector_matches

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def resolve_queue(config: Config, namespace: str, labels: Mapping[str, str], requested: str | None) -> str:
    """The queue for a workload in ``namespace`` with ``labels`` that asked for ``requested``."""
    if requested:
        return requested
    queues = config.queues
    by_namespace = queues["byNamespace"].get(namespace)
    if by_namespace:
        return by_namespace
    for rule in queues["bySelector"]:
        if selector_matches(rule["selector"], labels):
            return rule["queue"]
    return queues["default"]
