"""The report key: an Ed25519 pair that signs each hour's SHA256SUMS, kept apart from TLS.

The private key (PKCS#8 PEM, mode 0600) stays with whatever writes reports; auditors get the
public key (``<key>.pub``) and check signatures with ``vgate audit verify`` or plain openssl.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..core.errors import KeyFileError


def public_key_path(private_key_path: str | Path) -> Path:
    return Path(f"{private_key_path}.pub")


def ensure_key(path: str | Path) -> bool:
    """Create the key pair at ``path`` if there is none; True when this call created it.

    Replicas may race to create it on a shared volume: the key is written to a temporary file
    and linked into place (atomic, fails if another replica won), so nobody reads half a key.
    """
    path = Path(path)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    temporary = Path(name)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    public = public_key_path(path)
    public_temporary = temporary.with_name(temporary.name + ".pub")
    public_temporary.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                               serialization.PublicFormat.SubjectPublicKeyInfo))
    try:
        os.link(temporary, path)
    except FileExistsError:
        public_temporary.unlink()
        return False
    finally:
        temporary.unlink()
    os.replace(public_temporary, public)
    return True


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """The report signing key at ``path``; KeyFileError (one line: the file, what is wrong) otherwise."""
    key = _loaded(path, "private", lambda data: serialization.load_pem_private_key(data, password=None))
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(str(path), None, f"a {type(key).__name__.lstrip('_')}, not an Ed25519 private key")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """The report public key at ``path``; KeyFileError (one line: the file, what is wrong) otherwise."""
    key = _loaded(path, "public", serialization.load_pem_public_key)
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(str(path), None, f"a {type(key).__name__.lstrip('_')}, not an Ed25519 public key")
    return key


def _loaded(path: str | Path, which: str, load: Callable[[bytes], object]) -> object:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise KeyFileError(str(path), None, f"cannot read the report {which} key: {error.strerror or error}") from None
    try:
        return load(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        reason = str(error).split(". See https://", 1)[0]
        raise KeyFileError(str(path), None, f"not an Ed25519 {which} key in PEM ({reason})") from None


def sign(key: Ed25519PrivateKey, data: bytes) -> bytes:
    return key.sign(data)


def signature_valid(key: Ed25519PublicKey, data: bytes, signature: bytes) -> bool:
    try:
        key.verify(signature, data)
    except InvalidSignature:
        return False
    return True
