"""Scheduler: the tests that start vgate over HTTPS (the rest: tests/unit/reports/test_scheduler.py)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from webhook.reports.build import hour_directory
from webhook.reports.closed_hours import last_closed_hour
from webhook.reports.schedule import FIRST_HOUR


def test_a_running_server_reports_the_previous_hour(start_server, tmp_path):
    (tmp_path / "s0" / "reports").mkdir(parents=True)  # vgate first ran two hours ago
    started = datetime.now(timezone.utc) - timedelta(hours=2)
    (tmp_path / "s0" / "reports" / FIRST_HOUR).write_text(f"{started:%Y-%m-%dT%H}")
    server = start_server(workers=1, hourly_reports=True)
    previous = last_closed_hour(datetime.now(timezone.utc))  # in the grace minute (hh:00-hh:01), two hours back
    target = hour_directory(server.workdir / "reports", previous) / "SHA256SUMS.sig"
    deadline = time.monotonic() + 120  # it backfills the day oldest first, so the chain links
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert target.exists(), server.output()
    assert "wrote the compliance report of" in server.output()
    # on the embedded default, the anchor is the writer's own: in its home's state directory (0700), not
    # beside audit/ and reports/ (the server's HOME is a directory beside its working directory)
    anchor = server.workdir.with_name(server.workdir.name + "-home") / ".local/state/vgate/reports-anchor.jsonl"
    assert anchor.is_file() and previous.strftime("%Y-%m-%dT%H") in anchor.read_text(), server.output()
    assert anchor.parent.stat().st_mode & 0o777 == 0o700
    assert not (server.workdir / "anchor").exists()
