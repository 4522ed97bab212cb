"""One kind of object, listed and watched from the API server, kept as a small projection.

The client-go pattern: list (paged) to fill the store and learn the resourceVersion, then watch from
there; a watch the server ends is resumed from the last resourceVersion (bookmarks keep it fresh);
410 Gone (history compacted) or any error relists after a backoff. What is stored is what rules
need of each object (``project``), not the object: memory stays bounded by the count of objects.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from ..core.errors import WatchExpired
from .api import ApiServer

log = logging.getLogger("vgate")
PAGE = 500
NOT_SERVED_RETRY_SECONDS = 60.0
Projection = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Watched:
    """A kind vgate keeps: how the API names it, and what of each object it keeps."""

    group_version: str  # "v1", "scheduling.volcano.sh/v1beta1": Gatekeeper's inventory key
    kind: str
    path: str  # the collection's path, e.g. /api/v1/namespaces
    namespaced: bool
    project: Projection
    in_inventory: bool = True  # given to policies as data.inventory; False: kept for bindings only
    index: Callable[[dict[str, Any]], str | None] | None = None  # a secondary key (a pod's PodGroup)
    optional: bool = False  # a CRD's kind: not served (404) means none exist, asked again every minute


class Informer:
    """A thread that keeps ``store`` equal to the cluster's objects of one kind, keyed (namespace, name)."""

    def __init__(self, connect: Callable[[], ApiServer], watched: Watched, *, watch_seconds: int = 300,
                 backoff_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.watched = watched
        self.store: dict[tuple[str, str], dict[str, Any]] = {}
        self.indexed: dict[tuple[str, str], set[str]] = {}  # (namespace, index key) -> names, with ``index``
        self.synced = threading.Event()
        self.last_contact: float | None = None  # when the API server last answered (list, event, bookmark)
        self.error: str | None = None
        self.changes = 0  # bumped by every list and every change: what the inventory's version counts
        # objects per (namespace, label set), and a count bumped when a label set appears or goes: pods
        # come and go all the time, the label sets they come in rarely (effective egress reads those)
        self.label_sets: Counter[tuple[str, frozenset[tuple[str, str]]]] = Counter()
        self.label_set_changes = 0
        self._connect = connect
        self._watch_seconds = watch_seconds
        self._backoff = backoff_seconds
        self._clock = clock
        self._stop = threading.Event()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name=f"vgate-watch-{self.watched.kind}", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get((namespace, name))

    def _run(self) -> None:
        delay = self._backoff
        while not self._stop.is_set():
            try:
                with self._connect() as api:
                    version = self._list(api)
                    delay = self._backoff
                    while not self._stop.is_set():
                        version = self._watch(api, version)
            except WatchExpired:
                continue
            except requests.HTTPError as error:
                if not (self.watched.optional and error.response is not None and error.response.status_code == 404):
                    self._failed(error, delay)
                    delay = min(delay * 2, 30.0)
                    continue
                self._not_served()
                self._stop.wait(NOT_SERVED_RETRY_SECONDS)
            except Exception as error:  # noqa: BLE001 - an API server away must not end the watch
                self._failed(error, delay)
                delay = min(delay * 2, 30.0)

    def _failed(self, error: Exception, delay: float) -> None:
        self.error = f"{type(error).__name__}: {error}"
        log.warning("watching %s: %s; retrying in %.0f s", self.watched.path, self.error, delay)
        self._stop.wait(delay)

    def _not_served(self) -> None:
        """The kind's CRD is not installed: there are none of it (known, so synced); the store empties
        if the CRD went away."""
        if self.store:
            self.store, self.indexed, self.label_sets = {}, {}, Counter()
            self.changes += 1
            self.label_set_changes += 1
        self._contact()
        self.synced.set()

    def _list(self, api: ApiServer) -> str:
        fresh: dict[tuple[str, str], dict[str, Any]] = {}
        params: dict[str, Any] = {"limit": PAGE}
        while True:
            page = api.get(self.watched.path, params)
            for item in page.get("items") or []:
                fresh[_key(item)] = self.watched.project(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
            params = {"limit": PAGE, "continue": token}
        indexed: dict[tuple[str, str], set[str]] = {}
        for key, kept in fresh.items():
            self._index(indexed, key, kept, add=True)
        label_sets: Counter[tuple[str, frozenset[tuple[str, str]]]] = Counter(
            _label_set(key, kept) for key, kept in fresh.items())
        self.store, self.indexed = fresh, indexed  # readers see the old store or the new, never half of one
        self.label_sets = label_sets
        self.changes += 1
        self.label_set_changes += 1
        self._contact()
        self.synced.set()
        return str(page["metadata"]["resourceVersion"])

    def _watch(self, api: ApiServer, version: str) -> str:
        for event in api.watch(self.watched.path, version, self._watch_seconds):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise WatchExpired()  # 410 Gone: the history is compacted past our version
            self._contact()
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind in ("ADDED", "MODIFIED"):
                self.put(obj)
            elif kind == "DELETED":
                self.remove(obj)
        return version

    def put(self, obj: dict[str, Any]) -> None:
        """Keep an object as added or modified (a watch event, or a manifest given to `vgate eval`)."""
        key, kept = _key(obj), self.watched.project(obj)
        before = self.store.get(key)
        if kept != before:  # a status-only change (a node's heartbeat) changes nothing kept
            self._index(self.indexed, key, before, add=False)
            self._count(key, before, -1)
            self.store[key] = kept
            self._index(self.indexed, key, kept, add=True)
            self._count(key, kept, 1)
            self.changes += 1

    def remove(self, obj: dict[str, Any]) -> None:
        before = self.store.pop(_key(obj), None)
        if before is not None:
            self._index(self.indexed, _key(obj), before, add=False)
            self._count(_key(obj), before, -1)
            self.changes += 1

    def _count(self, key: tuple[str, str], kept: dict[str, Any] | None, step: int) -> None:
        if kept is None:
            return
        label_set = _label_set(key, kept)
        self.label_sets[label_set] += step
        if self.label_sets[label_set] == (1 if step > 0 else 0):  # a label set appeared, or went
            self.label_set_changes += 1
        if self.label_sets[label_set] <= 0:
            del self.label_sets[label_set]

    def _index(self, indexed: dict[tuple[str, str], set[str]], key: tuple[str, str], kept: dict[str, Any] | None,
               *, add: bool) -> None:
        found = self.watched.index(kept) if kept is not None and self.watched.index is not None else None
        if found is None:
            return
        names = indexed.setdefault((key[0], found), set())
        if add:
            names.add(key[1])
        else:
            names.discard(key[1])
            if not names:
                del indexed[(key[0], found)]

    def _contact(self) -> None:
        self.last_contact = self._clock()
        self.error = None


def _label_set(key: tuple[str, str], kept: dict[str, Any]) -> tuple[str, frozenset[tuple[str, str]]]:
    return key[0], frozenset(((kept.get("metadata") or {}).get("labels") or {}).items())


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
