"""Spools: where batches wait until the server has acknowledged them.

Both implementations keep the same contract (tests/ship/test_spool.py runs it on each):
`put` stores a payload under its key, `pending` lists keys oldest first, `get` reads one,
`ack` forgets it. The disk spool survives restarts: a payload is written to a temporary
file and renamed, so a crash never leaves half a batch; its size is bounded, and when
full the oldest payloads are dropped and counted (never silently).
"""

from __future__ import annotations

import os
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class Spool(Protocol):
    dropped: int

    def put(self, key: str, payload: bytes) -> None: ...
    def pending(self) -> list[str]: ...
    def get(self, key: str) -> bytes: ...
    def ack(self, key: str) -> None: ...
    def size(self) -> int: ...


class MemorySpool:
    """For tests and for agents that must not write to disk."""

    def __init__(self, max_bytes: int = 64 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.items: OrderedDict[str, bytes] = OrderedDict()
        self.dropped = 0

    def put(self, key: str, payload: bytes) -> None:
        self.items[key] = payload
        while self.size() > self.max_bytes and len(self.items) > 1:
            self.items.popitem(last=False)
            self.dropped += 1

    def pending(self) -> list[str]:
        return list(self.items)

    def get(self, key: str) -> bytes:
        return self.items[key]

    def ack(self, key: str) -> None:
        self.items.pop(key, None)

    def size(self) -> int:
        return sum(len(v) for v in self.items.values())


class DiskSpool:
    """A directory of `<time>-<seq>-<key>.iolb` files, oldest first by name."""

    SUFFIX = ".iolb"

    def __init__(self, directory: Path, max_bytes: int = 1 << 30) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.dropped = 0
        self._seq = 0
        for stale in self.dir.glob("*.tmp"):  # a crash mid-write
            stale.unlink(missing_ok=True)

    def _files(self) -> list[Path]:
        return sorted(self.dir.glob(f"*{self.SUFFIX}"))

    def _path(self, key: str) -> Path | None:
        for p in self._files():
            if self._key_of(p) == key:
                return p
        return None

    def put(self, key: str, payload: bytes) -> None:
        if _SAFE.search(key):
            raise ValueError(f"spool keys are [A-Za-z0-9._-]+, not {key!r}")
        if self._path(key) is not None:
            return  # already waiting: at-least-once does not need two copies
        self._seq += 1
        name = f"{time.time_ns():020d}-{self._seq:06d}-{key}{self.SUFFIX}"
        tmp = self.dir / (name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.dir / name)
        files = self._files()
        total = sum(p.stat().st_size for p in files)
        while total > self.max_bytes and len(files) > 1:
            oldest = files.pop(0)
            total -= oldest.stat().st_size
            oldest.unlink(missing_ok=True)
            self.dropped += 1

    def pending(self) -> list[str]:
        return [self._key_of(p) for p in self._files()]

    def _key_of(self, p: Path) -> str:
        return p.name.split("-", 2)[2][: -len(self.SUFFIX)]

    def get(self, key: str) -> bytes:
        p = self._path(key)
        if p is None:
            raise KeyError(key)
        return p.read_bytes()

    def ack(self, key: str) -> None:
        p = self._path(key)
        if p is not None:
            p.unlink(missing_ok=True)

    def size(self) -> int:
        return sum(p.stat().st_size for p in self._files())
