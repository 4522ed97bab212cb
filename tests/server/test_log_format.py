"""One record, one line: request-controlled text cannot forge log lines."""

from __future__ import annotations

import io
import logging

from webhook.server.log_format import FORMAT, EscapingFormatter


def test_control_characters_in_a_message_are_escaped_to_one_line():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(EscapingFormatter(FORMAT))
    logger = logging.getLogger("vgate-log-format-test")
    logger.addHandler(handler)
    logger.propagate = False
    logger.error("decision log write failed, validate %s is unrecorded", "evil\n2026-12-03 INFO vgate allowed\x1b[0m")
    line = stream.getvalue()
    assert line.count("\n") == 1 and line.endswith("\n")
    assert "evil\\x0a2026-12-03 INFO vgate allowed\\x1b[0m" in line
