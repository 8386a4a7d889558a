"""Spools: where batches wait until the server has acknowledged them.

Both implementations keep the same contract (tests/ship/test_spool.py runs it on each):
`put` stores a payload under its key, `pending` lists keys oldest first, `get` reads one,
`ack` forgets it, `quarantine` sets aside one the server refuses for good. The disk spool
survives restarts: a payload is written to a temporary file and renamed, so a crash (or a
full disk: the OSError is the caller's, the partial file is removed) never leaves half a
batch; its size is bounded, and when full the oldest payloads are dropped and counted
(never silently). Batches are users' data: the directories are 0700, the files 0600.
"""

from __future__ import annotations

import contextlib
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
    def quarantine(self, key: str, reason: str) -> str: ...
    def size(self) -> int: ...


def private_dir(path: Path) -> Path:
    """`path` created 0700 (and its missing parents); an existing one is left as it is."""
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.chmod(0o700)  # whatever the umask
    return path


def write_private(path: Path, data: bytes, sync: bool = False) -> None:
    """Write `path` as a new 0600 file; a failed write (a full disk) leaves no file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


class MemorySpool:
    """For tests and for agents that must not write to disk."""

    def __init__(self, max_bytes: int = 64 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.items: OrderedDict[str, bytes] = OrderedDict()
        self.rejected: dict[str, tuple[bytes, str]] = {}
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

    def quarantine(self, key: str, reason: str) -> str:
        self.rejected[key] = (self.items.pop(key), reason)
        return f"memory:{key}"

    def size(self) -> int:
        return sum(len(v) for v in self.items.values())


class DiskSpool:
    """A directory of `<time>-<seq>-<key>.iolb` files, oldest first by name; refused
    ones move to `rejected` (by default `<directory>/rejected`) beside a `.reason` file."""

    SUFFIX = ".iolb"

    def __init__(
        self, directory: Path, max_bytes: int = 1 << 30, rejected: Path | None = None
    ) -> None:
        self.dir = private_dir(Path(directory))
        self.rejected_dir = rejected or self.dir / "rejected"
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
        write_private(tmp, payload, sync=True)
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

    def quarantine(self, key: str, reason: str) -> str:
        """Move the payload of `key` to the rejected directory, with the server's reason
        beside it; its new path."""
        p = self._path(key)
        if p is None:
            raise KeyError(key)
        dest = private_dir(self.rejected_dir) / p.name
        os.replace(p, dest)
        with contextlib.suppress(OSError):  # a full disk: the log line says why
            write_private(dest.with_suffix(".reason"), reason.encode() + b"\n")
        return str(dest)

    def size(self) -> int:
        return sum(p.stat().st_size for p in self._files())
