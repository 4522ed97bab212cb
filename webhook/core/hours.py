"""The hour, vgate's unit of evidence, in each of the forms it is written.

Decisions are segmented, reported and verified by UTC hour. One hour has three spellings: the
label people and the CLI use (``2026-12-02T10``), the tag in segment file names
(``20261202T10``), and the report directory (``2026/12/02/10``). All conversions live here.
"""

from __future__ import annotations

from datetime import datetime, timezone

LABEL = "%Y-%m-%dT%H"
TAG = "%Y%m%dT%H"
PATH = "%Y/%m/%d/%H"


def label(hour: datetime) -> str:
    """``2026-12-02T10``: reports, messages, the CLI."""
    return hour.strftime(LABEL)


def tag(hour: datetime) -> str:
    """``20261202T10``: decision log segment names."""
    return hour.strftime(TAG)


def path(hour: datetime) -> str:
    """``2026/12/02/10``: a report's directory under the reports directory."""
    return hour.strftime(PATH)


def from_label(text: str) -> datetime:
    """``2026-12-02T10`` -> that hour, UTC; ValueError for anything else."""
    return datetime.strptime(text, LABEL).replace(tzinfo=timezone.utc)


def from_tag(text: str) -> datetime:
    """``20261202T10`` -> that hour, UTC."""
    return datetime.strptime(text, TAG).replace(tzinfo=timezone.utc)


def tag_of_timestamp(timestamp: str) -> str:
    """The segment tag of a record's ISO-8601 UTC ``time`` (``2026-12-02T10:15:...`` -> ``20261202T10``)."""
    return timestamp[:13].replace("-", "")


def minute_of_timestamp(timestamp: str) -> int:
    """The minute of a record's ISO-8601 ``time``; 0 when it has none."""
    return int(timestamp[14:16] or 0) if len(timestamp) >= 16 else 0
