"""SHA256SUMS: the checksums of a report's files, the file its Ed25519 signature covers, and the
digest by which the next report (and the daily one) links it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .keys import sign

SUMS, SIGNATURE = "SHA256SUMS", "SHA256SUMS.sig"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sign_files(directory: Path, names: Iterable[str], key: Ed25519PrivateKey) -> None:
    """Write ``SHA256SUMS`` of ``names`` in ``directory`` and its signature by ``key``."""
    sums = "".join(f"{sha256_file(directory / name)}  {name}\n" for name in names)
    (directory / SUMS).write_text(sums)
    (directory / SIGNATURE).write_bytes(sign(key, sums.encode()))


def digest_of(directory: Path) -> str:
    """The sha256 of a report's ``SHA256SUMS``: what a later report links it by."""
    return hashlib.sha256((directory / SUMS).read_bytes()).hexdigest()
