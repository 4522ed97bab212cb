"""Which Volcano queue a workload belongs to.

Order, first match wins: the queue the user named (kept; /validate judges whether the namespace
may use it), the queue the namespace's ``scheduling.volcano.sh/queue-name`` annotation names (as
Volcano's controllers read it; known only with ``cluster.watch``), the namespace's queue in
``queues.byNamespace``, the first label selector that matches, the default queue.

Volcano's own name ``default`` means "no queue chosen", as it does for Volcano: its Job and
PodGroup CRDs default ``spec.queue`` to ``default`` before any webhook runs, and its PodGroup
mutator (pkg/webhooks/admission/podgroups/mutate) replaces ``default`` with the namespace's queue.
Were ``default`` the user's choice, no Job or PodGroup would ever get its namespace's queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import Config
from .workloads import selector_matches

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
VOLCANO_DEFAULT_QUEUE = "default"


def annotated_queue(namespace_metadata: Mapping[str, Any] | None) -> str | None:
    """The queue a Namespace's metadata names in Volcano's annotation; None when it names none."""
    queue = ((namespace_metadata or {}).get("annotations") or {}).get(QUEUE_ANNOTATION)
    return str(queue) if queue else None


def is_chosen(requested: str | None) -> bool:
    """Whether a workload really named a queue: not empty, and not Volcano's CRD default."""
    return bool(requested) and requested != VOLCANO_DEFAULT_QUEUE


def queue_and_source(config: Config, namespace: str, labels: Mapping[str, str], requested: str | None,
                     namespace_queue: str | None = None) -> tuple[str, str]:
    """The queue for a workload in ``namespace`` with ``labels`` that asked for ``requested``, the
    namespace annotated with ``namespace_queue`` (None: not annotated, or not known); and where it
    came from (recorded with the decision): ``named``, ``namespace
    annotation``, ``queues.byNamespace``, ``queues.bySelector`` or ``queues.default``."""
    if requested and is_chosen(requested):
        return requested, "named"
    if namespace_queue:
        return namespace_queue, "namespace annotation"
    queues = config.queues
    by_namespace = queues.by_namespace.get(namespace)
    if by_namespace:
        return by_namespace, "queues.byNamespace"
    for rule in queues.by_selector:
        if selector_matches(rule.selector, labels):
            return rule.queue, "queues.bySelector"
    return queues.default, "queues.default"
