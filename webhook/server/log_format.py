"""Log lines an attacker cannot forge: control characters are escaped.

Names, uids, users and error messages come from requests; a newline in one would start a fake
log line ("... denied\n2026-12-03 INFO ... allowed"). The formatter escapes every control
character (and DEL) of the finished line, so one record is always one line.
"""

from __future__ import annotations

import logging
import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class EscapingFormatter(logging.Formatter):
    """The standard format, with control characters shown as \\xNN (tracebacks included)."""

    def format(self, record: logging.LogRecord) -> str:
        return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", super().format(record))


def configure(level: int = logging.INFO) -> None:
    """The root logger, writing escaped single lines to stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
