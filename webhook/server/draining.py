"""A worker about to be replaced answers with ``Connection: close``, so its clients move off it first.

A stopping granian worker closes its idle keep-alive connections at once. A request a client wrote
in that instant meets a closed connection, and the API server's webhook client does not resend a
POST it has written (Go's transport), so the write it was admitting fails. Before the master
(``granian_server``) stops a worker it marks it for ``DRAIN_SECONDS``: the worker then closes each
connection right after its answer, the client opens a new one, which another worker accepts and
keeps. What the old worker still holds when it stops are connections its clients had stopped
using. Measured by ``bench/rotation.py``. On SIGTERM (a pod deleted) every worker is marked
the same way before they stop, so the API server's connections move to another replica.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .periodic import every
from .runtime import RuntimeDir

DRAIN_SECONDS = 2.0  # every connection in use sees at least one answer in this time
RESPAWN_SECONDS = 3.5  # a new worker's time to come up before the old one is marked (granian's respawn_interval)
REPLACE_SECONDS = RESPAWN_SECONDS + DRAIN_SECONDS  # one worker replaced, less the old one's own exit
LOOK_SECONDS = 0.1

_marked = threading.Event()


def closes_connections() -> bool:
    """True once this worker is marked for replacement: each answer then says ``Connection: close``."""
    return _marked.is_set()


def is_marked(runtime: RuntimeDir, pid: int) -> bool:
    """Whether the master has marked worker ``pid`` (the worker's own look, and the probe port's /readyz)."""
    return (runtime.draining / str(pid)).exists()


def watch_for_mark(runtime: RuntimeDir) -> None:
    """In a worker: look for its mark every ``LOOK_SECONDS`` (a marked worker stays marked: it is stopping)."""
    pid = os.getpid()

    def look() -> None:
        if is_marked(runtime, pid):
            _marked.set()

    every(LOOK_SECONDS, look, "vgate-draining")


@contextmanager
def marked(runtime: RuntimeDir, pid: int) -> Iterator[None]:
    """In the master: worker ``pid`` marked for the length of the block."""
    runtime.draining.mkdir(exist_ok=True)
    mark = runtime.draining / str(pid)
    mark.touch()
    try:
        yield
    finally:
        mark.unlink(missing_ok=True)
