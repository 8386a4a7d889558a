"""The sweep-line I/O covering set (IOMiner; the zoom-in paper's Figure 1).

Every (rank, file) pair is one interval of I/O activity. The covering set is a minimum
set of those intervals whose union equals the union of all of them, i.e. the job's I/O
time: sweeping left to right, at each uncovered instant take, among the intervals that
have started, the one reaching furthest (the greedy longest-interval chain, optimal for
interval cover). The files of those intervals are where the job spent its I/O time, so
their bottlenecks are the job's.

That greedy cover lets whichever interval reaches furthest cover a stretch, so a 2.8 KB
file read at the first and the last second "covers" the run beside a 98.6 GiB shared file
(issue 21). `covering_set` therefore keeps the same union but splits it by activity
(`weighted_cover`): each stretch goes to the interval moving the most bytes and operations
per second there. `sweep` remains the paper's minimum cover.

Intervals come from the `F_{READ,WRITE}_{START,END}_TIMESTAMP` counters: data activity
from the first read/write start to the last read/write end; a record without data
operations (mdtest, stat-only) uses open start to close end instead, since its metadata
time is I/O time too. The standard streams are left out (their first-to-last write
spans the run while hardly any time is spent in them). A shared
record (rank -1) is one interval for all its ranks. With DXT (`source="auto"` when the log
has it, or `"dxt"`), traced files get one interval per rank from their segments instead.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from iolens.analyze.darshan.zoomin.files import file_stats
from iolens.analyze.darshan.zoomin.records import STREAMS, data_records, dxt_bytes
from iolens.model.darshan import DarshanJob


@dataclass(frozen=True)
class Interval:
    """One (rank, file) I/O interval, seconds since the job start; rank -1 = all ranks."""

    rank: int
    file: int  # Darshan record id
    start: float
    end: float
    bytes: int = 0
    path: str = ""
    ops: int = 0  # reads and writes (DXT: segments)

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Cover:
    """A covering-set member: the interval and the part of the I/O time it alone covers."""

    interval: Interval
    cover_start: float
    cover_end: float

    @property
    def covered(self) -> float:
        return self.cover_end - self.cover_start

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self.interval)
        d.update(cover_start=self.cover_start, cover_end=self.cover_end)
        return d


@dataclass
class CoveringSet:
    intervals: list[Interval]  # every (rank, file) interval, by start
    cover: list[Cover]  # the covering set, in time order

    @property
    def io_time(self) -> float:
        """Length of the union of all intervals: the job's I/O wall time."""
        return sum(c.covered for c in self.cover)

    def files(self) -> list[int]:
        """Distinct files of the covering set, by the time they cover (largest first)."""
        t = self.time_by_file()
        return sorted(t, key=lambda f: -t[f])

    def time_by_file(self) -> dict[int, float]:
        """I/O time each covering-set file alone covers, seconds."""
        t: dict[int, float] = {}
        for c in self.cover:
            t[c.interval.file] = t.get(c.interval.file, 0.0) + c.covered
        return t


def _key(i: Interval) -> tuple[float, int, int, int]:
    return (i.end, i.bytes, -i.rank, -i.file)


def sweep(intervals: list[Interval]) -> list[Cover]:
    """The greedy minimum cover of the union of `intervals` (zero-length ones ignored).

    O(n log n). Ties on the furthest end prefer more bytes, then the lower rank and file
    id, so the result does not depend on input order.
    """
    ivs = sorted((i for i in intervals if i.end > i.start), key=lambda i: (i.start, _key(i)))
    out: list[Cover] = []
    k, n = 0, len(ivs)
    while k < n:
        reach = ivs[k].start  # the first instant of a new stretch of the union
        while True:
            best: Interval | None = None
            # every interval already passed ends by `reach`, so only new ones can extend it
            while k < n and ivs[k].start <= reach:
                i = ivs[k]
                if i.end > reach and (best is None or _key(i) > _key(best)):
                    best = i
                k += 1
            if best is None:
                break  # nothing reaches past `reach`: this stretch of I/O time ends here
            out.append(Cover(best, reach, best.end))
            reach = best.end
    return out


def weighted_cover(intervals: list[Interval]) -> list[Cover]:
    """The union of `intervals` split among them by activity: each instant goes to the
    interval moving the most bytes and operations per second there.

    An interval's weight is its share of all bytes plus its share of all operations, over
    its length; at every stretch between two interval ends the heaviest active interval
    covers it (ties as `sweep`: furthest end, more bytes, lower rank and file id). A small
    file open or touched from the first second to the last therefore covers only what no
    busier file is active over, where the greedy minimum cover (`sweep`) gave it the run.
    The union, hence the I/O time, is the same as `sweep`'s. O(n log n).
    """
    ivs = sorted((i for i in intervals if i.end > i.start), key=lambda i: i.start)
    if not ivs:
        return []
    nbytes = float(sum(i.bytes for i in ivs))
    nops = float(sum(i.ops for i in ivs))

    def weight(i: Interval) -> float:
        w = (i.bytes / nbytes if nbytes > 0 else 0.0) + (i.ops / nops if nops > 0 else 0.0)
        return w / i.length

    points = sorted({t for i in ivs for t in (i.start, i.end)})
    heap: list[tuple[float, float, int, int, int, int]] = []
    out: list[Cover] = []
    k = 0
    for t0, t1 in itertools.pairwise(points):
        while k < len(ivs) and ivs[k].start <= t0:
            i = ivs[k]
            heapq.heappush(heap, (-weight(i), -i.end, -i.bytes, i.rank, i.file, k))
            k += 1
        while heap and ivs[heap[0][-1]].end <= t0:
            heapq.heappop(heap)
        if not heap:
            continue
        top = ivs[heap[0][-1]]
        if out and out[-1].interval is top and out[-1].cover_end == t0:
            out[-1] = Cover(top, out[-1].cover_start, t1)
        else:
            out.append(Cover(top, t0, t1))
    return out


def _first(*cols: np.ndarray) -> np.ndarray:
    """Element-wise smallest positive value of the columns (0 where none is positive)."""
    stacked = np.vstack(cols)
    masked = np.where(stacked > 0, stacked, np.inf)
    low = masked.min(axis=0)
    return np.where(np.isfinite(low), low, 0.0)


def _spans(
    job: DarshanJob,
    rank: np.ndarray,
    fid: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    nbytes: np.ndarray,
    ops: np.ndarray,
) -> list[Interval]:
    """One interval per (rank, file) of the rows: first start, last end, bytes and ops
    summed. (Sorted and reduced with numpy: a pandas groupby costs milliseconds a call,
    which on a log of a few records was most of the time.)"""
    if not len(rank):
        return []
    rank, fid = rank.astype(np.int64), fid.astype(np.uint64)
    order = np.lexsort((fid, rank))
    rank, fid = rank[order], fid[order]
    new = np.ones(len(order), bool)
    new[1:] = (rank[1:] != rank[:-1]) | (fid[1:] != fid[:-1])
    at = np.flatnonzero(new)
    lo = np.fmin.reduceat(start[order].astype(float), at)
    hi = np.fmax.reduceat(end[order].astype(float), at)
    b = np.add.reduceat(nbytes[order], at)
    n = np.add.reduceat(ops[order], at)
    names = job.names
    return [
        Interval(int(r), int(f), float(s0), float(e), int(x), names.get(int(f), ""), int(k))
        for r, f, s0, e, x, k in zip(rank[at], fid[at], lo, hi, b, n, strict=True)
    ]


def intervals(
    job: DarshanJob,
    recs: pd.DataFrame | None = None,
    source: Literal["auto", "counters", "dxt"] = "auto",
) -> list[Interval]:
    """Every (rank, file) interval of the job, by start (see the module docstring)."""
    recs = data_records(job) if recs is None else recs
    use_dxt = source == "dxt" or (source == "auto" and job.dxt is not None)
    dxt_ids: set[int] = set()
    out: list[Interval] = []
    if use_dxt and job.dxt is not None and len(job.dxt):
        d = job.dxt[job.dxt["module"] == "DXT_POSIX"]
        if len(d):
            ids = d["id"].to_numpy(np.uint64)
            out += _spans(
                job,
                d["rank"].to_numpy(),
                ids,
                d["start"].to_numpy(float),
                d["end"].to_numpy(float),
                np.asarray(dxt_bytes(d), np.int64),
                np.ones(len(d), np.int64),
            )
            dxt_ids.update(int(f) for f in np.unique(ids))
    if len(recs):
        r = recs[~recs["id"].astype(np.uint64).isin(np.array(sorted(dxt_ids), dtype=np.uint64))]
        start = _first(r["read_start"].to_numpy(), r["write_start"].to_numpy())
        end = np.maximum(r["read_end"].to_numpy(), r["write_end"].to_numpy())
        meta = end <= 0
        start = np.where(meta, r["open_start"].to_numpy(), start)
        end = np.where(meta, r["close_end"].to_numpy(), end)
        keep = end > 0
        out += _spans(
            job,
            r["rank"].to_numpy()[keep],
            r["id"].to_numpy(dtype=np.uint64)[keep],
            start[keep],
            end[keep],
            r["bytes"].to_numpy()[keep],
            r["requests"].to_numpy()[keep],
        )
    out = [i for i in out if i.path not in STREAMS]
    out.sort(key=lambda i: (i.start, i.rank, i.file))
    return out


def covering_set(
    job: DarshanJob,
    recs: pd.DataFrame | None = None,
    source: Literal["auto", "counters", "dxt"] = "auto",
) -> CoveringSet:
    """All intervals and the covering set of the job, its time split by activity
    (`weighted_cover`)."""
    ivs = intervals(job, recs, source)
    return CoveringSet(ivs, weighted_cover(ivs))


def cover_files(
    job: DarshanJob, cs: CoveringSet, files: pd.DataFrame | None = None
) -> list[dict[str, Any]]:
    """Statistics of the covering set's files (size, ranks, OSTs, stripe count, bytes,
    bandwidth) with the I/O time each covers, largest cover first."""
    files = file_stats(job) if files is None else files
    by_id = {int(r["id"]): r for r in files.to_dict("records")}
    total = cs.io_time
    out = []
    for fid, t in sorted(cs.time_by_file().items(), key=lambda kv: -kv[1]):
        f = by_id.get(fid, {})
        sc = f.get("stripe_count")
        ss = f.get("stripe_size")
        bw = f.get("bandwidth")
        out.append(
            {
                "id": fid,
                "path": f.get("path") or job.names.get(fid, ""),
                "size": int(f.get("size", 0)),
                "ranks": int(f.get("ranks", 0)),
                "shared": bool(f.get("shared", False)),
                "bytes": int(f.get("bytes", 0)),
                "bytes_read": int(f.get("bytes_read", 0)),
                "bytes_written": int(f.get("bytes_written", 0)),
                "requests": int(f.get("requests", 0)),
                "io_time": float(f.get("io_time", 0.0)),
                "bandwidth": None if bw is None or pd.isna(bw) else float(bw),
                "stripe_count": None if sc is None or pd.isna(sc) else int(sc),
                "stripe_size": None if ss is None or pd.isna(ss) else int(ss),
                "osts": [int(o) for o in f.get("osts", [])],
                "cover_s": t,
                "cover_share": t / total if total > 0 else 0.0,
            }
        )
    return out
