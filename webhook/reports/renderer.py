"""The one interface every report format implements (JSON, CSV, HTML, policy reports).

The builder makes one renderer of each format per report in the staging directory, passes it
every decision record of the hour once, in time order (``add``), then the finished hour
(``finish``): a format that needs the records (the CSV's rows, the policy reports' latest result
per resource) keeps what it needs while they stream by; one that needs only the totals writes at
the end. Adding a format is one subclass and its entry in ``build.RENDERERS``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, TextIO

import orjson

from .staged import Staged


@dataclass(frozen=True)
class FinishedHour:
    """What a renderer gets at the end: the hour's document, its spooled denials and errors, the language."""

    document: dict[str, Any]
    spools: dict[str, TextIO]  # "denials", "errors": one JSON object per line, every one of the hour
    language: str

    def listed(self, name: str, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The first ``limit`` (all with None) entries of a spool, read from its start."""
        spool = self.spools[name]
        spool.seek(0)
        return (orjson.loads(line) for line in itertools.islice(spool, limit))


class Renderer:
    """One report format, writing ``files`` into ``out`` (the staging directory, through the writer's
    own descriptors: ``staged.Staged``)."""

    files: ClassVar[tuple[str, ...]]

    def __init__(self, out: Staged) -> None:
        self.out = out

    def add(self, record: dict[str, Any]) -> None:
        """One decision record of the hour (each is given once, in time order)."""

    def finish(self, hour: FinishedHour) -> None:
        """Write the files."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what ``__init__`` opened (called whether or not ``finish`` ran)."""
