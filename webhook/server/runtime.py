"""The runtime directory: what `vgate serve`'s master and its workers share, in one place.

granian starts each worker from an import string with no arguments, so the master hands the
workers one thing through the environment, ``VGATE_RUNTIME_DIR``, and everything else as files
under it: the serve settings, the SIGHUP token, the probe port's status folder, the verified copy
of the serving pair. prometheus_client keeps its own variable, ``PROMETHEUS_MULTIPROC_DIR``,
pointed at the ``metrics`` folder here (its samples only: nothing of vgate's lives there).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNTIME_DIR_ENV = "VGATE_RUNTIME_DIR"
METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own; read when it is first imported


def _remove_in(master: int, root: Path) -> None:
    """Remove the folder when the master exits (a forked worker inherits the hook: it does nothing)."""
    if os.getpid() == master:
        shutil.rmtree(root, ignore_errors=True)


def metrics_dir() -> str | None:
    """prometheus_client's multiprocess folder, when this process belongs to a serve (or was given one)."""
    return os.environ.get(METRICS_ENV)


@dataclass(frozen=True)
class RuntimeDir:
    """One serve's shared folder: ``settings.json``, ``reload-token``, ``status/``, ``tls/``, ``metrics/``,
    ``draining/``."""

    root: Path

    @classmethod
    def create(cls) -> RuntimeDir:
        """A fresh folder, announced to this process's children (the workers) and to prometheus_client.

        Call it before anything imports prometheus_client: the client picks its storage then.
        """
        runtime = cls(Path(tempfile.mkdtemp(prefix="vgate-runtime-")))
        atexit.register(_remove_in, os.getpid(), runtime.root)
        runtime.metrics.mkdir()
        runtime.reload_token.touch()
        os.environ[RUNTIME_DIR_ENV] = str(runtime.root)
        os.environ.setdefault(METRICS_ENV, str(runtime.metrics))
        return runtime

    @classmethod
    def current(cls) -> RuntimeDir | None:
        """The folder of the serve this process belongs to; None outside one (tests, embedders)."""
        root = os.environ.get(RUNTIME_DIR_ENV)
        return cls(Path(root)) if root else None

    @property
    def metrics(self) -> Path:
        return self.root / "metrics"

    @property
    def reload_token(self) -> Path:
        """Touched by SIGHUP: every worker's watcher then looks at its files at once."""
        return self.root / "reload-token"

    @property
    def status(self) -> Path:
        """Each worker's /readyz answer for the probe port; present only when a probe port is served."""
        return self.root / "status"

    @property
    def tls(self) -> Path:
        """The verified copy of the serving pair that workers present."""
        return self.root / "tls"

    @property
    def draining(self) -> Path:
        """One empty file per worker being replaced or stopped, named by its pid (``draining``)."""
        return self.root / "draining"

    @property
    def settings_file(self) -> Path:
        return self.root / "settings.json"

    def write_settings(self, settings: dict[str, Any]) -> None:
        self.settings_file.write_text(json.dumps(settings))

    def settings(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.settings_file.read_text())
        return loaded

    def serve_probes_here(self) -> Path:
        """Make the status folder: workers then report readiness to the master's probe port."""
        self.status.mkdir(exist_ok=True)
        return self.status

    @property
    def probes_served(self) -> bool:
        return self.status.is_dir()
