"""The ingest side of the dataset: one writer per group, immutable segments, atomic commits.

An ingest server (`iolens serve --dataset DIR --group G`) hands every group commit of
batches to `SegmentWriter.load_many`, which keeps the contract of `iolens.ingest.load`:

* each table is cast to its model schema (or the batch is refused, naming the column);
* a batch whose idempotency key this group loaded before is skipped (the keys live in the
  group's `ingested` segments, so a restarted server still knows them);
* everything of the commit becomes visible together or not at all, and an acknowledged
  batch is durable.

A commit writes one Parquet file per table and hour into `_staging/G/`, fsyncs them, writes
its manifest `_commits/G/<id>.json` (the commit point), then renames each file into its
partition. A server killed at any point loses nothing acknowledged: on restart it rolls
every manifest forward (renames what is still staged) and deletes staged files no manifest
names. Readers ignore a half-renamed commit (`iolens.store.visibility.visible`). Servers of
different groups share nothing but the directory tree; a lock file keeps a second server
off a group that is already served.

Upserted tables (jobs and the `MERGED_BY_KEY` tables: files, components, forwarding,
component aliases) get a dataset-only `_seq` column (commit time, then batch order) and
jobs a `_partial` flag (`Batch.keep_known_jobs`), from which the views rebuild what
`load()` would have kept.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from hashlib import blake2b
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iolens.errors import StoreError
from iolens.model.batch import Batch
from iolens.model.schema import MERGED_BY_KEY
from iolens.store.dataset_layout import (
    PARTIAL,
    SEQ,
    TIME_COLUMN,
    FileLock,
    atomic_write,
    check_group,
    fsync_dir,
    init_dataset,
    new_id,
    part_of,
    partition_dir,
)
from iolens.store.visibility import Manifest

HOUR_US = 3_600_000_000
#: Batches per commit at most: `_seq` keeps the batch's position in 12 bits.
MAX_BATCHES = 4096


def write_parquet(table: pa.Table, path: Path, fsync: bool = True) -> int:
    """Write a segment (zstd) and make it durable; returns its size in bytes."""
    pq.write_table(table, path, compression="zstd")
    if fsync:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path.stat().st_size


def split_hours(table: pa.Table, column: str | None, now_us: int) -> Iterator[tuple[int, pa.Table]]:
    """(hour start in epoch us, rows) by the hour of `column` (commit time if None)."""
    if column is None or table.num_rows == 0:
        yield now_us - now_us % HOUR_US, table
        return
    us = pc.fill_null(table.column(column).cast(pa.int64()), now_us).to_numpy()
    hours = us // HOUR_US
    first = int(hours[0])
    if (hours == first).all():
        yield first * HOUR_US, table
        return
    for h in np.unique(hours):
        yield int(h) * HOUR_US, table.filter(pa.array(hours == h))


class KeyIndex:
    """Batch keys a group has loaded, as 16-byte digests: a set for recent keys plus sorted
    arrays per sealed hour (16 bytes a key), dropped beyond the horizon."""

    def __init__(self, horizon_h: float) -> None:
        self.horizon_us = int(horizon_h * HOUR_US)
        self.chunks: list[tuple[int, np.ndarray]] = []
        self.recent: set[bytes] = set()
        self.recent_hour = 0

    @staticmethod
    def digest(key: str) -> bytes:
        return blake2b(key.encode(), digest_size=16).digest()

    def __contains__(self, key: str) -> bool:
        d = self.digest(key)
        if d in self.recent:
            return True
        for _, arr in self.chunks:
            i = int(np.searchsorted(arr, d))
            if i < len(arr) and arr[i] == d:
                return True
        return False

    def load(self, hour_us: int, keys: Sequence[str]) -> None:
        arr = np.array(sorted({self.digest(k) for k in keys}), dtype="S16")
        self.chunks.append((hour_us, arr))

    def add(self, keys: Sequence[str], now_us: int) -> None:
        hour = now_us - now_us % HOUR_US
        if hour != self.recent_hour or len(self.recent) > 1_000_000:
            self.seal()
            self.recent_hour = hour
        self.recent.update(self.digest(k) for k in keys)
        self.chunks = [(h, a) for h, a in self.chunks if h >= hour - self.horizon_us]

    def seal(self) -> None:
        if self.recent:
            arr = np.array(sorted(self.recent), dtype="S16")
            self.chunks.append((self.recent_hour, arr))
            self.recent = set()

    def __len__(self) -> int:
        return len(self.recent) + sum(len(a) for _, a in self.chunks)


class SegmentWriter:
    """An ingest server's writer for one group (implements what the Store protocol needs)."""

    def __init__(
        self,
        root: str | Path,
        group: str,
        *,
        key_hours: float = 24.0,
        fsync: bool = True,
        manifest_grace_s: float = 60.0,
    ) -> None:
        self.root = init_dataset(root)
        self.group = check_group(group)
        self.location = f"{self.root} (group {group})"
        self.fsync = fsync
        self.manifest_grace_s = manifest_grace_s
        self._lock = FileLock(self.root / "_locks" / f"group-{group}.lock")
        if not self._lock.acquire():
            raise StoreError(f"group {group} of {self.root} is served by {self._lock.holder()}")
        self.staging = self.root / "_staging" / group
        self.commits = self.root / "_commits" / group
        self.staging.mkdir(parents=True, exist_ok=True)
        self.commits.mkdir(parents=True, exist_ok=True)
        self.recovered = self.recover()
        self.keys = KeyIndex(key_hours)
        self._load_keys()
        self.stats = {"commits": 0, "files": 0, "bytes": 0, "rows": 0}

    # -- restart -------------------------------------------------------------------------
    def recover(self) -> int:
        """Finish commits a killed server left half renamed; drop uncommitted files."""
        named: set[str] = set()
        finished = 0
        for path in sorted(self.commits.glob("*.json")):
            if path.name.startswith("."):
                continue
            m = Manifest.load(path)
            for out, staged in m.staged.items():
                named.add(staged)
                src, dst = self.root / staged, self.root / out
                if src.exists() and not dst.exists():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(src, dst)
                    finished += 1
        for p in self.staging.iterdir():
            rel = str(p.relative_to(self.root))
            if rel not in named:
                p.unlink()
        for p in self.commits.glob(".*.tmp"):
            p.unlink()
        return finished

    def _load_keys(self) -> None:
        base = self.root / "ingested"
        files = sorted(base.glob(f"date=*/hour=*/group={self.group}/*.parquet"))
        if not files:
            return
        hours = [part_of(str(f.relative_to(self.root))).hour for f in files]
        last = max(hours)
        for f, h in zip(files, hours, strict=True):
            if (last - h).total_seconds() * 1e6 <= self.keys.horizon_us:
                keys = pq.read_table(f, columns=["key"]).column("key").to_pylist()
                self.keys.load(int(h.replace(tzinfo=UTC).timestamp()) * 1_000_000, keys)

    # -- loading -------------------------------------------------------------------------
    def load_many(self, batches: list[Batch]) -> list[dict[str, int]]:
        """Write a group commit of batches; rows per batch, empty for a known key."""
        if len(batches) > MAX_BATCHES:
            out: list[dict[str, int]] = []
            for i in range(0, len(batches), MAX_BATCHES):
                out += self.load_many(batches[i : i + MAX_BATCHES])
            return out
        conformed = [b.conformed() for b in batches]
        now_us = time.time_ns() // 1000
        counts: list[dict[str, int]] = [{} for _ in batches]
        parts: dict[str, list[pa.Table]] = {}
        fresh: set[str] = set()
        loaded: list[tuple[str, str, int]] = []
        for i, (batch, tables) in enumerate(zip(batches, conformed, strict=True)):
            if batch.key is not None:
                if batch.key in fresh or batch.key in self.keys:
                    continue
                fresh.add(batch.key)
            seq = now_us * MAX_BATCHES + i
            for name, table in tables.items():
                n = table.num_rows
                if name == "jobs" or name in MERGED_BY_KEY:
                    table = table.append_column(SEQ, pa.array(np.full(n, seq), pa.int64()))
                if name == "jobs":
                    partial = np.full(n, batch.keep_known_jobs)
                    table = table.append_column(PARTIAL, pa.array(partial, pa.bool_()))
                parts.setdefault(name, []).append(table)
                counts[i][name] = n
            if batch.key is not None:
                loaded.append((batch.key, batch.source, sum(counts[i].values())))
        if loaded:
            loaded_at = datetime.fromtimestamp(now_us / 1e6, UTC).replace(tzinfo=None)
            parts.setdefault("ingested", []).append(
                pa.table(
                    {
                        "key": [k for k, _, _ in loaded],
                        "source": [s for _, s, _ in loaded],
                        "rows": pa.array([r for _, _, r in loaded], pa.int64()),
                        "loaded_at": pa.array([loaded_at] * len(loaded), pa.timestamp("us")),
                    }
                )
            )
        if any(t.num_rows for ts in parts.values() for t in ts):
            self.commit(parts, now_us)
        self.keys.add([k for k, _, _ in loaded], now_us)
        return counts

    def commit(self, parts: dict[str, list[pa.Table]], now_us: int | None = None) -> Manifest:
        """Stage, log, then publish one segment per table and hour (see module docs)."""
        now_us = now_us or time.time_ns() // 1000
        cid = new_id()
        m = Manifest("ingest", [], info={"group": self.group, "rows": {}})
        k = 0
        for name, tables in sorted(parts.items()):
            table = pa.concat_tables(tables, promote_options="none")
            if table.num_rows == 0:
                continue
            m.info["rows"][name] = table.num_rows
            for hour_us, rows in split_hours(table, TIME_COLUMN.get(name), now_us):
                staged = self.staging / f"{cid}-{k}.parquet"
                size = write_parquet(rows, staged, self.fsync)
                out = f"{partition_dir(name, hour_us, self.group)}/{cid}-{k}.parquet"
                m.outputs.append(out)
                m.staged[out] = str(staged.relative_to(self.root))
                self.stats["files"] += 1
                self.stats["bytes"] += size
                self.stats["rows"] += rows.num_rows
                k += 1
        if self.fsync:
            fsync_dir(self.staging)
        path = self.commits / f"{cid}.json"
        atomic_write(path, m.dumps(), self.fsync)  # the commit point
        made: set[Path] = set()
        for out in m.outputs:
            dst = self.root / out
            if dst.parent not in made:
                dst.parent.mkdir(parents=True, exist_ok=True)
                made.add(dst.parent)
            os.rename(self.root / m.staged[out], dst)
        if self.fsync:
            for d in made:
                fsync_dir(d)
        self.stats["commits"] += 1
        self._expire_manifests()
        return m

    def _expire_manifests(self) -> None:
        """Manifests outlive their commit by a grace period, for readers listing meanwhile."""
        cutoff = time.time() - self.manifest_grace_s
        for p in self.commits.glob("*.json"):
            with contextlib.suppress(OSError):
                if p.stat().st_mtime < cutoff:
                    p.unlink()

    # -- Store protocol ------------------------------------------------------------------
    def append(self, table: str, data: pa.Table) -> int:
        counts = self.load_many([Batch(source="append", **{table: data})])
        return counts[0].get(table, 0)

    def query(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        raise StoreError(
            f"{self.location} only ingests; query the dataset (iolens ... --db {self.root})"
        )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        raise StoreError(f"{self.location} only ingests")

    def register(self, name: str, data: pa.Table) -> None:
        raise StoreError(f"{self.location} only ingests")

    def unregister(self, name: str) -> None:
        pass

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def close(self) -> None:
        self.keys.seal()
        self._lock.release()

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
