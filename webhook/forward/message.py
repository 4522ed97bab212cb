"""One decision record as an RFC 5424 syslog message, and back (what ``verify --forwarded`` parses).

The collector must be able to route and search the records, and an auditor must be able to check
their hash chains from the collector's copy alone, so each message carries:

- PRI: facility 13 (log audit); severity 6 (informational), 5 (notice) for an admission with a
  warning, 4 (warning) for a refusal, 3 (error) for a failed evaluation;
- HOSTNAME: the replica that decided; APP-NAME ``vgate``; PROCID: the writer's process id;
- MSGID: the endpoint and the decision (``validate-denied``, ``mutate-allowed``), the event of a
  record that is not a decision (``heartbeat``), ``oversize`` for
  the placeholder of a record too large for the collector, ``anchor`` for a report writer's anchor line
  (its structured data ``anchor`` (the line's number), ``anchorId`` (the first 16 hex digits of the
  sha256 of that anchor's first line) and ``keyId`` (of the report key's SHA256 fingerprint));
- structured data ``[vgate@32473 segment="…" seq="…"]``: the segment file and the record's line
  number in it (1-based), which make every duplicate recognisable; an oversize placeholder adds the
  record's ``sha256`` and ``bytes``. 32473 is the private enterprise number RFC 5612 reserves for
  examples: an organisation that registers its own can map it on the collector;
- MSG: the record's JSON line exactly as the decision log holds it (no BOM, no newline), so its
  sha256 is the next record's ``prev``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import orjson

FACILITY_LOG_AUDIT = 13
SD_ID = "vgate@32473"
APP_NAME = "vgate"
_SEVERITY = {"warned": 5, "denied": 4, "error": 3}
_PRINTABLE = re.compile(rb"[^\x21-\x7e]")
_HEADER = re.compile(rb"<(?P<pri>\d{1,3})>1 (?P<time>\S+) (?P<host>\S+) (?P<app>\S+) (?P<procid>\S+) (?P<msgid>\S+) ")
_PARAM = re.compile(rb'([^\s="\]]+)="((?:[^"\\\]]|\\["\\\]])*)"')


@dataclass(frozen=True)
class Forwarded:
    """One message as a collector stored it: who sent it, where its record sits, the record's bytes."""

    msgid: str
    host: str
    params: dict[str, str]
    msg: bytes

    @property
    def place(self) -> tuple[str, int] | None:
        """(segment, line number) of the record this message carries, if it carries one."""
        segment, seq = self.params.get("segment"), self.params.get("seq")
        return (segment, int(seq)) if segment and seq and seq.isdigit() else None


def _field(value: str | None, limit: int) -> bytes:
    """A header field: printable ASCII without spaces, at most ``limit`` bytes, ``-`` when empty."""
    cleaned = _PRINTABLE.sub(b"_", (value or "").encode())[:limit]
    return cleaned or b"-"


def _param(value: str) -> bytes:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]").encode()


def _structured(params: dict[str, str]) -> bytes:
    return b"[" + SD_ID.encode() + b"".join(b" " + name.encode() + b'="' + _param(value) + b'"'
                                             for name, value in params.items()) + b"]"


def _message(pri: int, time: str | None, host: str | None, procid: str | None, msgid: str,
             params: dict[str, str], msg: bytes) -> bytes:
    return b"<%d>1 %s %s %s %s %s %s %s" % (pri, _field(time, 64), _field(host, 255), APP_NAME.encode(),
                                             _field(procid, 128), _field(msgid, 32), _structured(params), msg)


def record_message(line: bytes, segment: str, seq: int, writer_pid: str, max_bytes: int) -> tuple[bytes, bool]:
    """The message of the record ``line`` (no newline), line ``seq`` of ``segment``; and whether it is
    the oversize placeholder (the record itself would exceed ``max_bytes``: never cut, never sent)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    decision = str(record.get("decision") or "unknown")
    pri = FACILITY_LOG_AUDIT * 8 + _SEVERITY.get(decision, 6)
    event = record.get("event")
    msgid = str(event) if event and not record.get("decision") else f"{record.get('endpoint') or 'decision'}-{decision}"
    params = {"segment": segment, "seq": str(seq)}
    message = _message(pri, record.get("time"), record.get("replica"), writer_pid, msgid, params, line)
    if len(message) <= max_bytes:
        return message, False
    digest = hashlib.sha256(line).hexdigest()
    placeholder = {**params, "sha256": digest, "bytes": str(len(line))}
    note = orjson.dumps({"oversize": {"bytes": len(line), "sha256": digest, "maxMessageBytes": max_bytes}})
    return _message(FACILITY_LOG_AUDIT * 8 + 4, record.get("time"), record.get("replica"), writer_pid,
                    "oversize", placeholder, note), True


def anchor_message(line: bytes, seq: int, host: str, anchor_id: str, key_id: str) -> bytes:
    """The message of the report writer's anchor line number ``seq`` (what it signed, forwarded so the
    audit system holds its own copy of the anchor); ``anchor_id`` tells this writer's anchor from any
    other one the collector hears (another cluster's, a test's), ``key_id`` which key signs it."""
    try:
        at = orjson.loads(line).get("at")
    except (orjson.JSONDecodeError, AttributeError):
        at = None
    return _message(FACILITY_LOG_AUDIT * 8 + 5, at if isinstance(at, str) else None, host, None, "anchor",
                    {"anchor": str(seq), "anchorId": anchor_id, "keyId": key_id}, line)


def parse(raw: bytes) -> Forwarded | None:
    """A stored RFC 5424 message (as rsyslog's ``%rawmsg%`` or RFC 5424 templates write it), or None
    when the line is not one vgate sent."""
    header = _HEADER.match(raw)
    if header is None or header["app"] != APP_NAME.encode():
        return None
    rest = raw[header.end():]
    params: dict[str, str] = {}
    if rest.startswith(b"[" + SD_ID.encode()):
        end = _sd_end(rest)
        if end is None:
            return None
        for name, value in _PARAM.findall(rest[len(SD_ID) + 1:end]):
            params[name.decode()] = re.sub(rb"\\([\"\\\]])", rb"\1", value).decode()
        rest = rest[end + 1:]
    elif rest.startswith(b"-"):
        rest = rest[1:]
    else:
        return None
    msg = rest[1:] if rest.startswith(b" ") else rest
    return Forwarded(header["msgid"].decode(), header["host"].decode(), params, msg)


def _sd_end(data: bytes) -> int | None:
    """The index of the ``]`` closing the structured-data element at the start of ``data``."""
    escaped = False
    for index, byte in enumerate(data):
        if escaped:
            escaped = False
        elif byte == 0x5C:  # backslash
            escaped = True
        elif byte == 0x5D:  # ]
            return index
    return None
