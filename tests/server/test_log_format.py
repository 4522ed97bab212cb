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


def test_json_logs_and_the_decision_mirror_are_one_json_object_per_line(start_server):
    """--log-format json for the server's logs (stderr); audit.mirrorToStdout for the decisions (stdout),
    each mirrored line the very line the decision log holds."""
    import json

    from helpers import pod, review, shipped_config

    server = start_server(workers=1, config_text=shipped_config(audit={"mirrorToStdout": True}),
                          extra_args=("--log-format", "json"))
    forged = "evil\n2026-12-03 INFO vgate allowed"
    server.post("/validate", review(pod(), uid=forged))
    server.post("/validate", b"{not json")
    lines = [line for line in server.output().splitlines() if line.strip()]
    objects = [json.loads(line) for line in lines]  # every line of both streams parses
    logs = [o for o in objects if "level" in o and "message" in o]
    assert logs and all(set(o) >= {"time", "level", "logger", "message"} for o in logs)
    assert any("serving on https://" in o["message"] for o in logs)
    assert any(o["logger"] == "_granian" for o in logs), "granian's own lines are JSON too"
    segments = sorted(server.audit_dir.glob("*.jsonl"))
    recorded = [line for segment in segments for line in segment.read_text().splitlines()]
    mirrored = [line for line in lines if '"prev"' in line and '"replica"' in line]  # every record, beats too
    assert mirrored == recorded
    decided = [json.loads(line) for line in mirrored if '"endpoint"' in line]
    assert len(decided) == 2 and decided[0]["uid"] == forged and decided[1]["httpStatus"] == 400
    assert json.loads(mirrored[0])["event"] == "heartbeat"  # the worker's first record: its start
