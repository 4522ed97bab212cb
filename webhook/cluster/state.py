"""Cluster state: the kinds vgate's rules and mutation need, watched, with their freshness.

``ClusterState`` runs one informer per kind and answers the gateway's questions (a namespace's
Volcano queue annotation) and /readyz's (synced? how stale?). Its objects are shaped as
Gatekeeper's replicated ``data.inventory`` (``cluster[groupVersion][kind][name]``,
``namespace[ns][groupVersion][kind][name]``) by ``inventory``, so rules written for Gatekeeper's
inventory read them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..core.queues import annotated_queue
from .api import ApiServer
from .informer import Informer, Watched


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """The metadata rules read: name, namespace, labels, annotations."""
    metadata = obj.get("metadata") or {}
    kept = {key: metadata[key] for key in ("name", "namespace", "labels", "annotations") if key in metadata}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}


NAMESPACES = Watched("v1", "Namespace", "/api/v1/namespaces", False, _metadata)
Store = Mapping[tuple[str, str], dict[str, Any]]  # (namespace, name) -> the object kept


def shaped_inventory(stores: Iterable[tuple[Watched, Store]]) -> dict[str, Any]:
    """Objects of each watched kind in Gatekeeper's ``data.inventory`` shape: what the server's
    evaluator is given and what `vgate eval` gives its rules."""
    shaped: dict[str, Any] = {"cluster": {}, "namespace": {}}
    for watched, store in stores:
        for (namespace, name), obj in list(store.items()):
            where = shaped["namespace"].setdefault(namespace, {}) if watched.namespaced else shaped["cluster"]
            where.setdefault(watched.group_version, {}).setdefault(watched.kind, {})[name] = obj
    return shaped
KINDS = {"namespaces": NAMESPACES}


class ClusterState:
    """The watched kinds of one worker, and what the gateway and the probes ask of them."""

    def __init__(self, connect: Callable[[], ApiServer], kinds: Iterable[Watched] = KINDS.values(), *,
                 watch_seconds: int = 300) -> None:
        self.informers = {watched.kind: Informer(connect, watched, watch_seconds=watch_seconds)
                          for watched in kinds}
        self._shaped: tuple[int, dict[str, Any]] = (-1, {})

    def start(self) -> None:
        for informer in self.informers.values():
            informer.start()

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def synced(self) -> bool:
        """Whether every kind has been listed once (before that, nothing is known)."""
        return all(informer.synced.is_set() for informer in self.informers.values())

    def freshness(self, now: float) -> dict[str, dict[str, Any]]:
        """Per kind: synced, objects held, seconds since the API server last answered, the last error."""
        return {kind: {"synced": informer.synced.is_set(), "objects": len(informer.store),
                       "contactAgeSeconds": None if informer.last_contact is None
                       else round(now - informer.last_contact, 1), "error": informer.error}
                for kind, informer in self.informers.items()}

    def namespace_queue(self, namespace: str) -> str | None:
        """The queue Volcano takes from the namespace's annotation; None if it names none."""
        informer = self.informers.get("Namespace")
        found = informer.get("", namespace) if informer is not None else None
        return annotated_queue((found or {}).get("metadata"))

    def version(self) -> int:
        """Grows with every change of any watched kind: engines replace their inventory when it does."""
        return sum(informer.changes for informer in self.informers.values())

    def versioned_inventory(self) -> tuple[int, dict[str, Any]]:
        """The inventory and its version, shaped once per version."""
        version = self.version()
        if self._shaped[0] != version:
            self._shaped = (version, self.inventory())
        return self._shaped

    def inventory(self) -> dict[str, Any]:
        """Every object kept, in Gatekeeper's ``data.inventory`` shape."""
        return shaped_inventory((informer.watched, informer.store) for informer in self.informers.values())
