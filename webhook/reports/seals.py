"""Acknowledging a torn segment: a crash can cut a segment's last write short, and the torn line
stays there. ``vgate audit seal`` records, signed with the report key, exactly what the segment
held and why: its size, the torn line's byte offset, length and sha256, and the sha256 of every
byte before it. ``vgate audit verify`` then reports that one torn line (the finding at that
offset, nothing matched by its text) as acknowledged instead of failing on it forever. If any byte
of the segment changes afterwards, the seal no longer matches and the torn line is a problem again.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..audit.durable import replace_durably
from ..audit.regular_files import SMALL, NotRegular, open_regular, read_regular
from ..core.errors import NothingToSeal
from .keys import sign, signature_valid

FIELDS = ("segment", "bytes", "records", "tornOffset", "tornBytes", "tornSha256", "wholeSha256")


@dataclass(frozen=True)
class Seal:
    reason: str
    sealed_at: str
    torn_at: int  # the byte offset of the one torn line it acknowledges


def seal_path(segment: Path) -> Path:
    return segment.with_name(segment.name + ".seal")


def seal_segment(segment: Path, reason: str, key: Ed25519PrivateKey, now: datetime) -> Path:
    """Write ``<segment>.seal`` (the statement) and ``.seal.sig``; NothingToSeal if it is whole.

    Both are written to new files and renamed into place: a symbolic link planted at either name
    is replaced, never followed (it once led the seal over the anchor)."""
    statement = _statement(segment)
    if statement is None:
        raise NothingToSeal(f"{segment}: its last line is whole: nothing to acknowledge")
    body = orjson.dumps({**statement, "reason": reason, "sealedAt": now.isoformat(timespec="seconds")},
                        option=orjson.OPT_SORT_KEYS)
    path = seal_path(segment)
    replace_durably(path.with_name(path.name + ".sig"), sign(key, body), 0o640)  # auditors' group reads seals
    replace_durably(path, body, 0o640)
    return path


def acknowledged(segment: Path, key: Ed25519PublicKey) -> Seal | None:
    """The seal of ``segment`` if it is signed by ``key`` and still matches every byte of the segment."""
    path = seal_path(segment)
    try:
        body = read_regular(path, SMALL)
        signature = read_regular(path.with_name(path.name + ".sig"), SMALL)
    except OSError:
        return None
    if not signature_valid(key, body, signature):
        return None
    sealed = orjson.loads(body)
    try:
        statement = _statement(segment)
    except OSError:
        return None
    if not isinstance(sealed, dict) or statement is None or {k: sealed.get(k) for k in FIELDS} != statement:
        return None
    return Seal(str(sealed.get("reason", "")), str(sealed.get("sealedAt", "")), int(str(statement["tornOffset"])))


def _statement(segment: Path) -> dict[str, object] | None:
    """What a seal states of a segment with a torn last line (None if the last line is whole), read
    once, streamed, from the regular file it must be (NotRegular otherwise)."""
    whole, records, size, tail = hashlib.sha256(), 0, 0, b""
    with os.fdopen(open_regular(segment), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            size += len(block)
            data = tail + block
            cut = data.rfind(b"\n") + 1
            whole.update(data[:cut])
            records += data.count(b"\n", 0, cut)
            tail = data[cut:]
            if len(tail) > 64 << 20:
                raise NotRegular(errno.EFBIG, "a last line over 64 MiB: not a torn record vgate writes")
    if not tail:
        return None
    return {"segment": segment.name, "bytes": size, "records": records, "tornOffset": size - len(tail),
            "tornBytes": len(tail), "tornSha256": hashlib.sha256(tail).hexdigest(), "wholeSha256": whole.hexdigest()}
