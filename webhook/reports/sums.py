"""SHA256SUMS: the checksums of a report's files, the file its Ed25519 signature covers, and the
digest by which the next report (and the daily one) links it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..audit.regular_files import read_regular
from .keys import sign
from .staged import Staged

SUMS, SIGNATURE = "SHA256SUMS", "SHA256SUMS.sig"


def listed(sums: bytes) -> list[tuple[str, str]]:
    """The (digest, file name) pairs a SHA256SUMS lists, in order (a line without two spaces names nothing)."""
    return [(digest, name) for digest, _, name in (line.partition("  ") for line in
                                                   sums.decode(errors="replace").splitlines())]


def sign_files(staged: Staged, names: Iterable[str], key: Ed25519PrivateKey) -> str:
    """Write ``SHA256SUMS`` of ``names`` from the digests of the bytes the writer wrote (never read
    back from the volume), and its signature by ``key``; return its digest (what the anchor records)."""
    sums = "".join(f"{staged.digests[name]}  {name}\n" for name in names).encode()
    staged.write(SUMS, sums)
    staged.write(SIGNATURE, sign(key, sums))
    return hashlib.sha256(sums).hexdigest()


def digest_of(directory: Path) -> str:
    """The sha256 of a report's ``SHA256SUMS`` on the volume: what a later report links it by
    (NotRegular if it is not a regular file)."""
    return hashlib.sha256(read_regular(directory / SUMS)).hexdigest()
