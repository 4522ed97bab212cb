"""Hot reload: build a complete new gateway off to the side, then swap it in atomically.

Each worker process watches what its gateway was built from (the config file, the policy
directory, the exceptions directory) and a reload token that the master touches on SIGHUP.
When anything changes it loads and compiles everything anew; only if that succeeds does the new
gateway replace the old one (one reference assignment; requests in flight finish on the one they
started with). A broken policy or config keeps the old set serving, is logged with its file,
line and reason, shows in /readyz and in ``vgate_config_last_reload_successful``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..core.errors import SourceError
from .gateway import Gateway
from .metrics import Metrics
from .periodic import every
from .runtime import RuntimeDir

log = logging.getLogger("vgate")


def touch_reload_token() -> bool:
    """Make every worker's watcher look at its files now (what SIGHUP does); False without a token."""
    runtime = RuntimeDir.current()
    if runtime is not None:
        os.utime(runtime.reload_token)
    return runtime is not None


@dataclass(frozen=True)
class ReloadStatus:
    at: str
    ok: bool
    revision: str
    error: str | None = None


class LiveGateway:
    """The gateway in force, and how to replace it."""

    def __init__(self, load: Callable[[], Gateway], metrics: Metrics) -> None:
        self._load = load
        self._metrics = metrics
        self.current = load()
        self.status = ReloadStatus(_now(), True, self.current.revision)
        self._lock = threading.Lock()
        self._signature = self._fingerprint()
        metrics.reload_ok.set(1)

    def reload(self) -> ReloadStatus:
        """Load everything anew and swap it in; keep the old gateway if anything is invalid."""
        with self._lock:
            self._signature = self._fingerprint()
            try:
                fresh = self._load()
            except SourceError as error:
                log.error("reload failed, still serving policy revision %s: %s", self.current.revision, error)
                self._metrics.reloads.labels("failure").inc()
                self._metrics.reload_ok.set(0)
                self.status = ReloadStatus(_now(), False, self.current.revision, str(error))
                return self.status
            fresh.decisions = self.current.decisions  # one decision log per process, across reloads
            self.current = fresh
            self._metrics.reloads.labels("success").inc()
            self._metrics.reload_ok.set(1)
            self.status = ReloadStatus(_now(), True, fresh.revision)
            log.info("reloaded: policy revision %s, config %s", fresh.revision, fresh.config.source)
            return self.status

    def changed(self) -> bool:
        return self._fingerprint() != self._signature

    def watch(self, interval: float) -> threading.Thread:
        """Poll the sources (and the SIGHUP token) every ``interval`` seconds in a daemon thread."""

        def look() -> None:
            if self.changed():
                self.reload()

        return every(interval, look, "vgate-reload")

    def _fingerprint(self) -> tuple[tuple[str, int, int], ...]:
        paths = list(self.current.sources())
        runtime = RuntimeDir.current()
        if runtime is not None:
            paths.append(runtime.reload_token)
        files: list[Path] = []
        for path in paths:
            files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        signature = []
        for file in files:
            try:
                stat = file.stat()  # follows symlinks, so ConfigMap volume swaps (..data) are seen
            except OSError:
                signature.append((str(file), -1, -1))
                continue
            signature.append((str(file), stat.st_mtime_ns, stat.st_size))
        return tuple(signature)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
