"""An imported file's identity: a hash of its bytes, so the same file under two names, or
imported twice, loads once (the batch key `ingest.load` skips when it has seen it)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from iolens.errors import reading


def content_key(path: Path, source: str) -> str:
    """`source:hash` of the file's bytes, read in 1 MiB blocks."""
    h = hashlib.blake2b(digest_size=16)
    with reading(path), path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return f"{source}:{h.hexdigest()}"
