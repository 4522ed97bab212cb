"""The report writer's publication sequence, named step by step as each durable action is done.

In order: ``staged`` (every file written and fsync'd), ``signed`` (SHA256SUMS and its signature),
``anchored`` (the anchor's line appended and synced), ``superseded`` (a reissue moved the old
version aside, file by file), ``renamed`` (the staging directory is the hour's), ``published``
(the rename is durable). A crash after ``anchored`` leaves a staging directory the anchor names:
the next writer completes it (``publication.complete_anchored``); a crash before leaves nothing the
anchor claims, and the next writer starts again. The crash tests kill a real writer at each step.
"""

from __future__ import annotations

from collections.abc import Callable

SEQUENCE = ("staged", "signed", "anchored", "superseded", "renamed", "published")
observer: Callable[[str], None] | None = None  # set by a test (or a tracer) to see each step


def reached(step: str) -> None:
    """The writer has just done ``step`` (one of SEQUENCE)."""
    if observer is not None:
        observer(step)
