"""The report writer's anchor, forwarded: the audit system's own copy of what was signed.

The anchor records every report the writer signs (its digest, the records and log lines it
signed, the writers). Kept only on the writer's volume, it is out of the insider's reach but also
out of the auditor's; forwarded line by line to the collector, it lets ``vgate audit verify
--forwarded`` compare, from the collector's file alone, what each hour's report signed with the
records the collector holds: the tail of a writer's newest segment, which no hash chain can show
missing, is then bounded by the hour's report. The writer sends the lines the collector does not
have after each run; its cursor (``<anchor>.forwarded``, the number of lines the collector has, per
URL) sits beside the anchor, on the writer's own volume.
"""

from __future__ import annotations

import errno
import hashlib
import socket
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from ..audit.durable import replace_durably
from ..audit.regular_files import DOCUMENT, read_regular
from ..core.config import ForwardSettings
from ..core.errors import CollectorError
from .message import anchor_message
from .transport import Link, connect


def cursor_path(anchor: Path) -> Path:
    return anchor.with_name(anchor.name + ".forwarded")


def _delivered(anchor: Path, url: str) -> int:
    try:
        saved = orjson.loads(read_regular(cursor_path(anchor)))
    except (OSError, orjson.JSONDecodeError):
        return 0
    return int(saved.get("lines", 0)) if isinstance(saved, dict) and saved.get("url") == url else 0


def forward_anchor(settings: ForwardSettings, anchor: Path, key_id: str,
                   link_factory: Callable[[ForwardSettings], Link] = connect) -> int:
    """Send the anchor lines the collector does not have, each naming the key that signs them
    (``key_id``); return how many. OSError if it cannot (the next run sends them: the cursor moves
    only once the collector has them)."""
    try:
        lines = read_regular(anchor, DOCUMENT).splitlines()
    except FileNotFoundError:
        return 0
    start = _delivered(anchor, settings.url)
    if start >= len(lines):
        return 0
    host = socket.gethostname()  # the report writer's pod
    link = link_factory(settings)
    try:
        anchor_id = hashlib.sha256(lines[0]).hexdigest()[:16]  # this anchor, among any the collector hears
        link.send([anchor_message(line, number, host, anchor_id, key_id)
                   for number, line in enumerate(lines[start:], start + 1)])
        if link.settle_seconds:
            time.sleep(link.settle_seconds)
            if not link.alive():
                raise CollectorError(errno.ECONNRESET, "the collector closed the connection before the anchor "
                                                       "lines settled")
    finally:
        link.close()
    replace_durably(cursor_path(anchor), orjson.dumps({"url": settings.url, "lines": len(lines)}))
    return len(lines) - start
