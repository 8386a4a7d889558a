"""DXT first-pass merging: a file record's segments become the tracer's compressed runs.

The same compression Beacon and the LD_PRELOAD tracer apply at the source, so a Darshan
job's client records look like a traced job's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from iolens.ingest.darshan_records import MERGE_WINDOW, DxtRecord


def merge_segments(segs: np.ndarray, window: int = MERGE_WINDOW) -> dict[str, np.ndarray]:
    """All runs of one op's segments at once (see `merge_runs`)."""
    parts = list(merge_runs(segs[a : a + window] for a in range(0, len(segs), window)))
    if not parts:
        return {k: np.empty(0, dt) for k, dt in _RUN_TYPES.items()}
    return {k: np.concatenate([p[k] for p in parts]).astype(dt) for k, dt in _RUN_TYPES.items()}


def merge_runs(windows: Iterable[np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
    """Merge one op's segments (time order, given in windows) into the tracer's records.

    A run is `count` segments of one `size`, the k-th at `offset + k * stride` (contiguous
    when stride == size), as Beacon's first-pass compression and the LD_PRELOAD tracer do:
    any two equal-size segments in a row can open a run, which then extends while the next
    segment keeps the size and the stride. Yields runs as soon as they are closed: offset,
    size, stride, count, start, end (seconds since the job start: first start, last end)
    and busy (seconds inside the calls). A run open at the end of a window is carried into
    the next, so memory follows the window, not the record.
    """
    pending: dict[str, Any] | None = None
    for segs in windows:
        if not len(segs):
            continue
        runs = _merge_window(segs)
        if pending is not None and not _join(pending, runs):
            yield {k: np.array([v]) for k, v in pending.items()}
        pending = {k: v[-1].item() for k, v in runs.items()}
        if len(runs["count"]) > 1:
            yield {k: v[:-1] for k, v in runs.items()}
    if pending is not None:
        yield {k: np.array([v]) for k, v in pending.items()}


_RUN_TYPES = {
    "offset": np.int64,
    "size": np.int64,
    "stride": np.int64,
    "count": np.int64,
    "start": np.float64,
    "end": np.float64,
    "busy": np.float64,
}


# (np.concatenate, not np.r_: r_ costs ~20 us a call, and a log can hold thousands of records)
_ZERO8 = np.zeros(1, np.int8)
_NO = np.zeros(1, bool)


def _merge_window(s: np.ndarray) -> dict[str, np.ndarray]:
    return _runs(s, *_run_bounds(s))


def _run_bounds(s: np.ndarray, breaks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(first segment, segment count) of each run of `s`; `breaks[k]`: segment k starts a
    new record, so no run crosses it (several records merged in one pass)."""
    off, ln = s["offset"], s["length"]
    n = len(s)
    if n == 1:
        return np.zeros(1, np.int64), np.ones(1, np.int64)
    eq = ln[1:] == ln[:-1]  # eq[k]: segments k and k+1 have the same size
    if breaks is not None:
        eq &= ~breaks[1:]
    d = np.diff(off)  # d[k]: offset step from k to k+1
    # c[k-1] for k in 1..n-2: segment k+1 continues the stride of k-1 -> k
    c = eq[1:] & eq[:-1] & (d[1:] == d[:-1])
    # maximal blocks of c (k = a..b) cover segments a-1 .. b+1
    edge = np.diff(np.concatenate((_ZERO8, c.astype(np.int8), _ZERO8)))
    a = np.flatnonzero(edge == 1) + 1  # first k of each block
    b = np.flatnonzero(edge == -1)  # last k of each block
    run_first = a - 1
    run_last = b + 1
    # a block starting right where the previous one ended gives up the shared segment
    clash = np.concatenate((_NO, run_first[1:] == run_last[:-1]))
    run_first = run_first + clash
    cover = np.zeros(n + 1, np.int64)
    np.add.at(cover, run_first, 1)
    np.add.at(cover, run_last + 1, -1)
    covered = np.cumsum(cover[:-1]) > 0
    # uncovered segments pair up greedily along chains of equal sizes
    free = ~covered
    link = np.concatenate((_NO, free[1:] & free[:-1] & eq))
    chain_start = free & ~link
    idx = np.arange(n)
    last_start = np.maximum.accumulate(np.where(chain_start, idx, 0))
    starts = free & ((idx - last_start) % 2 == 0)
    starts[run_first] = True
    first = np.flatnonzero(starts)
    return first, np.diff(np.append(first, n))


def _runs(s: np.ndarray, first: np.ndarray, counts: np.ndarray) -> dict[str, np.ndarray]:
    off, ln = s["offset"], s["length"]
    n = len(s)
    last = first + counts - 1
    stride = np.where(counts > 1, off[np.minimum(first + 1, n - 1)] - off[first], ln[first])
    return {
        "offset": off[first],
        "size": ln[first],
        "stride": stride,
        "count": counts,
        "start": s["start"][first],
        "end": s["end"][last],
        "busy": np.add.reduceat(s["end"] - s["start"], first),
    }


def _join(p: dict[str, Any], runs: dict[str, np.ndarray]) -> bool:
    """Fold the run left open by the previous window into the first run of this one."""
    size, off, cnt, stride = (runs[k][0].item() for k in ("size", "offset", "count", "stride"))
    if size != p["size"]:
        return False
    if p["count"] == 1:
        step = off - p["offset"]
        if cnt > 1 and stride != step:
            return False
    else:
        step = p["stride"]
        if off != p["offset"] + p["count"] * step or (cnt > 1 and stride != step):
            return False
    runs["offset"][0] = p["offset"]
    runs["stride"][0] = step
    runs["count"][0] = cnt + p["count"]
    runs["start"][0] = p["start"]
    runs["busy"][0] += p["busy"]
    return True


DXT_COLUMNS = ["module", "rank", "hostname", "id", "op"]
DXT_COLUMNS += ["offset", "length", "stride", "count", "start", "end"]
_DXT_RUNS = {"offset": "offset", "length": "size", "stride": "stride", "count": "count",
             "start": "start", "end": "end"}  # fmt: skip


def dxt_frame(parts: list[dict[str, Any]]) -> pd.DataFrame | None:
    """`DarshanJob.dxt` from merged runs tagged with module, rank, host, file id and op."""
    if not parts:
        return None
    n = [len(p["count"]) for p in parts]

    def tag(key: str, dtype: Any) -> np.ndarray:
        return np.repeat(np.array([p[key] for p in parts], dtype=dtype), n)

    cols: dict[str, Any] = {
        "module": tag("module", object),
        "rank": tag("rank", np.int64),
        "hostname": tag("hostname", object),
        "id": tag("id", np.uint64),
        "op": tag("op", object),
    }
    for col, key in _DXT_RUNS.items():
        cols[col] = np.concatenate([p[key] for p in parts])
    return pd.DataFrame(cols, columns=DXT_COLUMNS)


def merged_dxt(rec: DxtRecord) -> Iterator[dict[str, Any]]:
    """The merged runs of one DXT record, in pieces tagged for `dxt_frame` and the
    importer (module, rank, hostname, id, op)."""
    tag = _tag(rec)
    for op, windows in rec.ops():
        for runs in merge_runs(windows):
            yield {**tag, "op": op, **runs}


def merged_records(recs: Iterable[DxtRecord]) -> Iterator[dict[str, Any]]:
    """`merged_dxt` of each record in turn: the same runs in the same order. Records
    smaller than a window are merged together, a window's worth of segments per numpy
    pass: a log of many small records (one per file and rank) otherwise paid ~0.3 ms of
    numpy call overhead per record."""
    batch: list[tuple[dict[str, Any], np.ndarray]] = []
    held = 0
    for rec in recs:
        if rec.writes + rec.reads >= MERGE_WINDOW:
            yield from _merged_batch(batch)
            batch, held = [], 0
            yield from merged_dxt(rec)
            continue
        tag = _tag(rec)
        for op, windows in rec.ops():  # consumed here, before the next record is read
            for segs in windows:
                if len(segs):
                    batch.append(({**tag, "op": op}, segs))
                    held += len(segs)
        if held >= MERGE_WINDOW:
            yield from _merged_batch(batch)
            batch, held = [], 0
    yield from _merged_batch(batch)


def tallied(
    recs: Iterable[DxtRecord], info: dict[str, Any], hosts: dict[int, str] | None = None
) -> Iterator[DxtRecord]:
    """`recs` as they pass, counted into a module's `info` ("records", "segments") and
    each rank's host noted in `hosts`."""
    info["records"] = info["segments"] = 0
    for rec in recs:
        info["records"] += 1
        info["segments"] += rec.writes + rec.reads
        if hosts is not None and rec.hostname and rec.rank >= 0:
            hosts.setdefault(rec.rank, rec.hostname)
        yield rec


def _merged_batch(batch: list[tuple[dict[str, Any], np.ndarray]]) -> Iterator[dict[str, Any]]:
    """Each (tag, segments) of `batch` as one piece of runs, merged in one pass."""
    if not batch:
        return
    segs = np.concatenate([s for _, s in batch])
    starts = np.cumsum([0] + [len(s) for _, s in batch[:-1]])
    breaks = np.zeros(len(segs), bool)
    breaks[starts] = True
    first, counts = _run_bounds(segs, breaks)
    runs = _runs(segs, first, counts)
    cuts = np.searchsorted(first, starts)  # each piece's first run
    for (tag, _), a, b in zip(batch, cuts, [*cuts[1:], len(first)], strict=True):
        yield {**tag, **{k: v[a:b] for k, v in runs.items()}}


def _tag(rec: DxtRecord) -> dict[str, Any]:
    return {"module": rec.module, "rank": rec.rank, "hostname": rec.hostname,
            "id": np.uint64(rec.id)}  # fmt: skip
