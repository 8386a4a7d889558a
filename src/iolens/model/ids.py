"""Stable ids derived from names, so every collector computes the same id for a path."""

from __future__ import annotations

import hashlib


def file_id(path: str) -> int:
    """Signed 64-bit id of a file path (first 8 bytes of BLAKE2b, little-endian)."""
    digest = hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)
