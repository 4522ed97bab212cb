"""Which hours may be reported: closed ones only, each signed once (the CLI and the scheduler alike).

An hour is closed one GRACE after it ends, so that records committed at its last instant have
landed. A report of an hour still open would sign a log that keeps growing; one of a future hour
would sign nothing. A signed hour is never rewritten in place: ``--reissue`` writes a new version
beside the old one, which is kept (see ``build.reissue``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from ..core import hours
from ..core.errors import NotReportable
from .sums import SUMS

GRACE = timedelta(seconds=60)  # let records of the closing hour land before it is reported


def last_closed_hour(now: datetime) -> datetime:
    """The newest hour whose report may be written at ``now``."""
    return (now - GRACE).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


def check_reportable(hour: datetime, now: datetime, directory: Path, *, reissue: bool) -> None:
    """Raise NotReportable unless ``hour`` is closed at ``now`` and (unless reissued) not yet signed."""
    if hour > last_closed_hour(now):
        closes = hour + timedelta(hours=1) + GRACE
        when = "is in the future" if hour > now else "has not closed yet"
        raise NotReportable(f"hour {hours.label(hour)} {when}: it can be reported from {closes.isoformat()} on",
                            usage=True)
    if (directory / SUMS).exists() and not reissue:
        raise NotReportable(f"the report of {hours.label(hour)} exists ({directory}) and is never rewritten: "
                            "write a new version with --reissue --reason TEXT", usage=False)
