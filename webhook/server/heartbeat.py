"""Each worker's proof of life, in its own chain of the decision log.

An hour in which no admission request arrived and an hour in which no vgate ran leave the same log
unless vgate says it was there: every worker appends a heartbeat record (``event: heartbeat``, its
interval, its policy revision) at start and every minute, durable and hash-chained like a
decision. The hourly report reads them (``reports/availability.py``) and states when vgate was up
and the gaps when it was not.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..reports.availability import HEARTBEAT
from .periodic import every

if TYPE_CHECKING:
    from .reload import LiveGateway

HEARTBEAT_SECONDS = 60
log = logging.getLogger("vgate")


def start_heartbeats(live: LiveGateway, interval: float = HEARTBEAT_SECONDS) -> None:
    """A heartbeat now, then every ``interval`` seconds while the worker lives."""
    def beat() -> None:
        gateway = live.current
        if gateway.decisions is not None:
            gateway.decisions.record({"event": HEARTBEAT, "intervalSeconds": interval,
                                      "policyRevision": gateway.revision})
    try:
        beat()
    except Exception as error:  # noqa: BLE001 - the log unwritable at start: /readyz says so; beats go on
        log.warning("heartbeat: %s", error)
    every(interval, beat, "vgate-heartbeat")
