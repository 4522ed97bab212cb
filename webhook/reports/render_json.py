"""report.json: the hour's document, with every denial and error streamed in from the spools.

A busy hour can have hundreds of thousands of denials; they are spooled to a temporary file while
the segments are read and copied into the JSON here, never held in memory.
"""

from __future__ import annotations

from typing import IO, Any, TextIO

import orjson

from .renderer import FinishedHour, Renderer


def write_json(out: IO[bytes], document: dict[str, Any], spools: dict[str, TextIO]) -> None:
    """report.json with every denial and error, streamed from the spools instead of held in memory."""
    head = orjson.dumps(document, option=orjson.OPT_INDENT_2)
    out.write(head[:-2])  # reopen the top-level object: drop "\n}"
    for name, spool in spools.items():
        out.write(f',\n  "{name}": ['.encode())
        spool.seek(0)
        for index, line in enumerate(spool):
            out.write((b"," if index else b"") + b"\n    " + line.strip().encode())
        out.write(b"\n  ]")
    out.write(b"\n}\n")


class JsonRenderer(Renderer):
    files = ("report.json",)

    def finish(self, hour: FinishedHour) -> None:
        with self.out.open("report.json") as out:
            write_json(out, hour.document, hour.spools)
