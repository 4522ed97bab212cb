"""The gateway configuration as the rest of vgate reads it: a complete, validated document.

Read, validated and completed (every ``default`` of the schema filled in) by ``files.config_file``;
the core only reads it, so it never carries fallbacks of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")


@dataclass(frozen=True)
class QueueDefinition:
    """One Volcano queue the gateway may assign, and who may use it."""

    name: str
    priority_class: str | None
    qos_class: str | None
    namespaces: tuple[str, ...]


@dataclass(frozen=True)
class Config:
    """The validated configuration. ``document`` is the complete dict policies see as data."""

    source: str
    document: dict[str, Any]

    @property
    def server(self) -> dict[str, Any]:
        return self.document["server"]

    @property
    def volcano(self) -> dict[str, Any]:
        return self.document["volcano"]

    @property
    def queues(self) -> dict[str, Any]:
        return self.document["queues"]

    @property
    def qos(self) -> dict[str, Any]:
        return self.document["qos"]

    @property
    def priority_values(self) -> dict[str, int]:
        return self.document["priorityClasses"]["values"]

    @property
    def global_default_priority_class(self) -> str:
        return self.document["priorityClasses"]["globalDefault"]

    def queue(self, name: str) -> QueueDefinition | None:
        spec = self.queues["definitions"].get(name)
        if spec is None:
            return None
        return QueueDefinition(name, spec.get("priorityClass"), spec.get("qosClass"), tuple(spec["namespaces"]))
