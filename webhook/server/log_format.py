"""Log lines an attacker cannot forge, as text or as JSON.

Names, uids, users and error messages come from requests; a newline in one would start a fake
log line ("... denied\n2026-12-03 INFO ... allowed"). The text formatter escapes every control
character (and DEL) of the finished line, so one record is always one line; the JSON formatter
(``--log-format json``, for Fluent Bit, Vector or any shipper that parses JSON lines) gets the
same from JSON's own escaping. Logs go to stderr; stdout is left to the decision mirror
(``audit.mirrorToStdout``). Nothing secret is ever logged: no keys, no request bodies.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timezone
from typing import Any

import orjson

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class EscapingFormatter(logging.Formatter):
    """The standard format, with control characters shown as \\xNN (tracebacks included)."""

    def format(self, record: logging.LogRecord) -> str:
        return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (and exception, when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


def configure(level: int = logging.INFO, log_format: str = "text") -> None:
    """The root logger, writing one line per record to stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else EscapingFormatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def granian_logging(log_format: str) -> dict[str, Any]:
    """granian's own loggers (its workers configure them), to stderr, in the same format as vgate's."""
    formatter = ({"()": "webhook.server.log_format.JsonFormatter"} if log_format == "json"
                 else {"()": "webhook.server.log_format.EscapingFormatter", "fmt": FORMAT})
    handler = {"formatter": "vgate", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    return {
        "formatters": {"vgate": formatter},
        "handlers": {"console": handler, "access": dict(handler)},
        "loggers": {"_granian": {"handlers": ["console"], "level": "INFO", "propagate": False},
                    "granian.access": {"handlers": ["access"], "level": "INFO", "propagate": False}},
    }
