"""When vgate was up in an hour, from its own log: an idle hour is not an unguarded one.

Every worker appends a heartbeat record to its chain every minute (``event: heartbeat``, with its
interval), and every decision is a sign of life too. A minute of the hour is *up* when some writer's
heartbeat or decision falls in it, or a heartbeat within the interval and a half before covers it
(beats drift by a few milliseconds across minute boundaries); the rest are the gaps, stated as
ranges of minutes. An hour without heartbeats and without decisions says that no vgate recorded
anything: an outage, or vgate not running, never "no traffic".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

HEARTBEAT = "heartbeat"
MINUTES = 60


def is_heartbeat(record: dict[str, Any]) -> bool:
    return record.get("event") == HEARTBEAT


@dataclass
class Availability:
    """The minutes of one hour some writer showed life in."""

    up: set[int] = field(default_factory=set)
    heartbeats: int = 0
    replicas: set[str] = field(default_factory=set)

    def add(self, record: dict[str, Any]) -> None:
        try:
            when = datetime.fromisoformat(str(record.get("time")))
        except ValueError:
            return  # a record without a readable time is the chain check's finding, not a sign of life
        first = when.minute
        if is_heartbeat(record):
            self.heartbeats += 1
            self.replicas.add(str(record.get("replica") or ""))
            interval = record.get("intervalSeconds")
            reach = float(interval) * 1.5 if isinstance(interval, (int, float)) and 0 < interval <= 600 else 90.0
            last = min(MINUTES - 1, int((when.minute * 60 + when.second + reach) // 60))
        else:
            last = first
        self.up.update(range(first, last + 1))

    def section(self, hour_label: str) -> dict[str, Any]:
        """The report's ``availability``: minutes up, each gap as a range, how many heartbeats."""
        gaps: list[dict[str, Any]] = []
        for minute in range(MINUTES):
            if minute in self.up:
                continue
            if gaps and gaps[-1]["toMinute"] == minute - 1:
                gaps[-1]["toMinute"] = minute
            else:
                gaps.append({"fromMinute": minute, "toMinute": minute})
        hour = hour_label.rsplit("T", 1)[-1]
        for gap in gaps:
            gap["minutes"] = gap["toMinute"] - gap["fromMinute"] + 1
            gap["range"] = f"{hour}:{gap['fromMinute']:02d}-{hour}:{gap['toMinute']:02d}"
        return {"upMinutes": len(self.up), "heartbeats": self.heartbeats, "replicas": len(self.replicas - {""}),
                "gaps": gaps, "recorded": bool(self.up)}
