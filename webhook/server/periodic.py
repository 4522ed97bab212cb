"""A look every few seconds, in a daemon thread that outlives any one failed look."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("vgate")


def every(interval: float, look: Callable[[], None], name: str) -> threading.Thread:
    """Call ``look`` every ``interval`` seconds until the process ends; log (and survive) its errors."""

    def loop() -> None:
        while True:
            time.sleep(interval)
            try:
                look()
            except Exception:  # the watcher must outlive any one failed look
                log.exception("%s: error", name)

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread
