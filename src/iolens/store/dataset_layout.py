"""Where everything sits in a scale-out dataset, and the file primitives its writers share.

Paths of segments (`<table>/date=/hour=/group=/*.parquet`), the table lists that decide
what is a segment, atomic writes, sortable ids and the advisory locks of `_locks/`
(`docs/scale-out.md`; `dataset.py` has the whole layout).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from iolens.errors import InputError, StoreError

MARKER = "iolens-dataset.json"
FORMAT = 1

#: Tables the ingest servers write as segments; every other table is an analysis result.
INGEST_TABLES = (
    "components",
    "forwarding",
    "component_aliases",
    "jobs",
    "files",
    "client_io",
    "server_samples",
    "metrics",
    "mpi_hints",
    "ingested",
)
#: Second-pass (inter-node) client records, written by compaction only.
MERGED = "client_io_merged"
#: Time column that places a row in its hourly partition; other tables use commit time.
TIME_COLUMN = {"client_io": "t_start", "server_samples": "ts", "metrics": "ts"}
TIMED = (*TIME_COLUMN, MERGED)
#: Group of the segments compaction writes for timed tables (all groups merged).
COMPACTED = "_compacted"
#: Dataset-only columns: the commit order of upserted rows and the partial-view flag.
SEQ, PARTIAL = "_seq", "_partial"


_GROUP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

_PART_RE = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$|^hour=(\d{2})$|^group=([A-Za-z0-9_.-]+)$")


def check_group(name: str) -> str:
    """A group name usable in paths (`g01`, `fwd-a`); names starting with `_` are reserved."""
    if not _GROUP_RE.match(name):
        raise InputError("--group", f"bad group name {name!r}: letters, digits, '.', '_', '-'")
    return name


def is_dataset(path: str | Path) -> bool:
    return (Path(path) / MARKER).is_file()


def init_dataset(root: str | Path) -> Path:
    """Create the dataset root (idempotent; several servers may race to do it)."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise StoreError(f"{root} exists and is not a directory")
    root.mkdir(parents=True, exist_ok=True)
    if not is_dataset(root):
        if any(p.name != MARKER for p in root.iterdir()):
            raise StoreError(f"{root} is not empty and not an iolens dataset")
        atomic_write(root / MARKER, json.dumps({"format": FORMAT, "created": now_iso()}))
    meta = json.loads((root / MARKER).read_text())
    if meta.get("format", 0) > FORMAT:
        raise StoreError(f"{root} has dataset format {meta['format']}; upgrade iolens")
    for d in ("_staging", "_commits", "_compactions", "_results", "_locks"):
        (root / d).mkdir(exist_ok=True)
    return root


def now_iso() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat()


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, text: str, fsync: bool = True) -> None:
    """Write `text` to `path` all at once: a temporary name, fsync, rename."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.rename(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def new_id() -> str:
    """Sortable unique id: microseconds since the epoch, then random bits."""
    return f"{time.time_ns() // 1000:014x}-{uuid.uuid4().hex[:10]}"


def partition_dir(table: str, hour_us: int, group: str) -> str:
    """Relative directory of `table`'s partition holding the hour starting at `hour_us`."""
    t = datetime(1970, 1, 1) + timedelta(microseconds=hour_us)
    return f"{table}/date={t:%Y-%m-%d}/hour={t:%H}/group={group}"


@dataclass(frozen=True)
class Part:
    """Where a segment file sits: table, hour (naive UTC start) and group."""

    table: str
    hour: datetime
    group: str

    @property
    def date(self) -> str:
        return f"{self.hour:%Y-%m-%d}"


def part_of(relpath: str) -> Part:
    bits = relpath.split("/")
    if len(bits) != 5:
        raise StoreError(f"not a segment path: {relpath}")
    date = hour = group = None
    for b in bits[1:4]:
        m = _PART_RE.match(b)
        if not m:
            raise StoreError(f"not a segment path: {relpath}")
        date, hour, group = m.group(1) or date, m.group(2) or hour, m.group(3) or group
    if date is None or hour is None or group is None:
        raise StoreError(f"not a segment path: {relpath}")
    return Part(bits[0], datetime.fromisoformat(f"{date}T{hour}:00:00"), group)


def list_segments(root: Path, tables: Sequence[str] = (*INGEST_TABLES, MERGED)) -> set[str]:
    """Relative paths of every `*.parquet` segment under the tables' partitions."""
    out: set[str] = set()
    for table in tables:
        base = root / table
        if not base.is_dir():
            continue
        for d in subdirs(base, "date="):
            for h in subdirs(d, "hour="):
                for g in subdirs(h, "group="):
                    with os.scandir(g) as it:
                        for e in it:
                            if e.name.endswith(".parquet") and not e.name.startswith("."):
                                out.add(f"{table}/{d.name}/{h.name}/{g.name}/{e.name}")
    return out


def subdirs(path: Path, prefix: str) -> list[Path]:
    with os.scandir(path) as it:
        return [Path(e.path) for e in it if e.name.startswith(prefix) and e.is_dir()]


class FileLock:
    """An exclusive advisory lock on a file (held until release or process death)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait: bool = False) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {os.uname().nodename}\n".encode())
        self.fd = fd
        return True

    def holder(self) -> str:
        try:
            return self.path.read_text().strip() or "another process"
        except OSError:
            return "another process"

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
