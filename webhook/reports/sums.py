"""SHA256SUMS: the checksums of an hour's report files, the file its Ed25519 signature covers."""

from __future__ import annotations

import hashlib
from pathlib import Path

SUMS, SIGNATURE = "SHA256SUMS", "SHA256SUMS.sig"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
