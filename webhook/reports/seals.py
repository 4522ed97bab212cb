"""Acknowledging a torn segment: a crash can cut a segment's last write short, and the torn line
stays there. ``vgate audit seal`` records, signed with the report key, exactly what the segment
held (size, records, the torn bytes' hash) and why; ``vgate audit verify`` then reports the torn
line as acknowledged instead of failing on it forever. A seal covers those bytes only: if the
segment changes afterwards, the seal no longer matches and the torn line is a problem again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..core.errors import NothingToSeal
from .keys import sign, signature_valid


@dataclass(frozen=True)
class Seal:
    reason: str
    sealed_at: str


def seal_path(segment: Path) -> Path:
    return segment.with_name(segment.name + ".seal")


def seal_segment(segment: Path, reason: str, key: Ed25519PrivateKey, now: datetime) -> Path:
    """Write ``<segment>.seal`` (the statement) and ``.seal.sig``; NothingToSeal if it is whole."""
    statement = _statement(segment)
    if statement is None:
        raise NothingToSeal(f"{segment}: its last line is whole: nothing to acknowledge")
    body = orjson.dumps({**statement, "reason": reason, "sealedAt": now.isoformat(timespec="seconds")},
                        option=orjson.OPT_SORT_KEYS)
    path = seal_path(segment)
    path.write_bytes(body)
    path.with_name(path.name + ".sig").write_bytes(sign(key, body))
    return path


def acknowledged(segment: Path, key: Ed25519PublicKey) -> Seal | None:
    """The seal of ``segment`` if it is signed by ``key`` and still matches the segment's bytes."""
    path = seal_path(segment)
    signature = path.with_name(path.name + ".sig")
    if not path.is_file() or not signature.is_file():
        return None
    body = path.read_bytes()
    if not signature_valid(key, body, signature.read_bytes()):
        return None
    sealed = orjson.loads(body)
    if {k: sealed.get(k) for k in ("segment", "bytes", "records", "tornSha256")} != _statement(segment):
        return None
    return Seal(str(sealed.get("reason", "")), str(sealed.get("sealedAt", "")))


def _statement(segment: Path) -> dict[str, object] | None:
    """What a seal states of a segment with a torn last line (None if the last line is whole)."""
    data = segment.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    whole, _, torn = data.rpartition(b"\n")
    return {"segment": segment.name, "bytes": len(data), "records": whole.count(b"\n") + (1 if whole else 0),
            "tornSha256": hashlib.sha256(torn).hexdigest()}
