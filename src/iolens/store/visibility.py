"""What a reader of a dataset may see: commit and compaction manifests, and the snapshot
of segment files they leave visible (the protocol is in `dataset.py`'s docstring)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from iolens.store.dataset_layout import (
    INGEST_TABLES,
    MERGED,
    TIMED,
    list_segments,
    now_iso,
    part_of,
    subdirs,
)


@dataclass
class Manifest:
    """An ingest commit or a compaction: what it adds (outputs) and replaces (inputs)."""

    kind: Literal["ingest", "compaction"]
    outputs: list[str]
    inputs: list[str] = field(default_factory=list)
    staged: dict[str, str] = field(default_factory=dict)  # output -> staging path
    created: str = field(default_factory=now_iso)
    info: dict[str, Any] = field(default_factory=dict)

    def dumps(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> Manifest:
        return cls(**json.loads(path.read_text()))


class ManifestCache:
    """Manifests are immutable once written: each is read once per process."""

    def __init__(self) -> None:
        self._seen: dict[str, Manifest] = {}

    @staticmethod
    def names(root: Path) -> set[str]:
        out: list[Path] = []
        commits = root / "_commits"
        if commits.is_dir():
            for g in subdirs(commits, ""):
                out += g.glob("*.json")
        out += (root / "_compactions").glob("*.json")
        return {str(p) for p in out if not p.name.startswith(".")}

    def current(self, root: Path) -> dict[str, Manifest]:
        out: dict[str, Manifest] = {}
        live = self.names(root)
        for key in live:
            if key not in self._seen:
                try:
                    self._seen[key] = Manifest.load(Path(key))
                except FileNotFoundError:  # deleted after its grace period meanwhile
                    continue
            out[key] = self._seen[key]
        for key in set(self._seen) - live:
            del self._seen[key]
        return out


def list_staging(root: Path) -> set[str]:
    """Relative paths of every file waiting in `_staging/` (renames not done yet)."""
    out: set[str] = set()
    staging = root / "_staging"
    if staging.is_dir():
        for d in subdirs(staging, ""):
            with os.scandir(d) as it:
                out.update(f"_staging/{d.name}/{e.name}" for e in it)
    return out


def visible(
    files: set[str],
    manifests: dict[str, Manifest],
    staged: set[str],
    known: set[str] | None = None,
) -> set[str]:
    """The files a reader may use, from (in this order) the manifest names `known`, the
    `staged` files, the segment `files` and the `manifests`: a manifest that was not yet
    known or still has staged files may be half renamed, so what it wrote is hidden; a
    finished compaction hides its inputs."""
    out = set(files)
    for key, m in manifests.items():
        if (known is not None and key not in known) or any(s in staged for s in m.staged.values()):
            out.difference_update(m.outputs)
        elif m.kind == "compaction":
            out.difference_update(m.inputs)
    return out


@dataclass
class Snapshot:
    """The segment files a reader uses (relative paths by table) and the results head."""

    root: str
    files: dict[str, list[str]]
    results: dict[str, Any] = field(default_factory=dict)
    taken: float = field(default_factory=time.time)
    #: Only these jobs' client records and job-attributed samples (a per-job task's view).
    jobs: list[str] | None = None

    def restrict(self, lo: datetime | None, hi: datetime | None, margin_h: int = 1) -> Snapshot:
        """Only the hourly partitions of timed tables overlapping [lo - margin, hi + margin]:
        what a task working on that period needs (partition pruning by construction)."""
        if lo is None or hi is None:
            return self
        a = lo.replace(minute=0, second=0, microsecond=0) - timedelta(hours=margin_h)
        b = hi + timedelta(hours=margin_h)
        files = {
            t: [f for f in fs if t not in TIMED or a <= part_of(f).hour <= b]
            for t, fs in self.files.items()
        }
        return Snapshot(self.root, files, self.results, self.taken, self.jobs)

    def scope(self, jobs: list[str]) -> Snapshot:
        """Only `jobs`' rows of `client_io` and `server_samples` (rows without a job go)."""
        return Snapshot(self.root, self.files, self.results, self.taken, list(jobs))

    def count(self) -> int:
        return sum(len(v) for v in self.files.values())


def take_snapshot(root: Path, cache: ManifestCache | None = None) -> Snapshot:
    """What a reader sees now (the order of the listings matters: see `visible`)."""
    cache = cache or ManifestCache()
    known = cache.names(root)
    staged = list_staging(root)
    files = list_segments(root)
    manifests = cache.current(root)
    seen = sorted(visible(files, manifests, staged, known))
    by_table: dict[str, list[str]] = {t: [] for t in (*INGEST_TABLES, MERGED)}
    for f in seen:
        by_table.setdefault(f.split("/", 1)[0], []).append(f)
    return Snapshot(str(root), by_table, read_head(root))


def read_head(root: Path) -> dict[str, Any]:
    head = root / "_results" / "HEAD.json"
    try:
        return json.loads(head.read_text())
    except FileNotFoundError:
        return {"version": 0, "tables": {}}
