"""Access-pattern surveyor (SIOX FileSurveyor): sequential, strided and random accesses.

Per file, process (node, pid, rank), layer and data op, every access of the job is put in
one class by how it moved from the access before it in the same stream:

- **sequential**: it starts exactly where the previous one ended (contiguous);
- **strided**: it is `stride` bytes after the previous one, and the stride repeats (the
  step before or after it is the same), so a program could predict it; the stride is
  kept (negative = backwards, 0 = re-reading one block);
- **random**: anything else.

The input is the tracer's first-pass compressed records (`client_io`): `count` accesses at
`offset + k * stride`, so a record's internal steps all share its stride, and only the
steps between records need comparing. A record of two accesses has one step, which is
only strided if a neighbouring step repeats it: the tracer merges every pair of random
accesses into a record with an arbitrary "stride". The first access of a stream takes
the class of the step after it (a single-access stream is sequential: one whole read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.store.base import Store
from iolens.store.queries import file_layouts

#: Share of a stream's accesses one class needs to name the stream's pattern.
DOMINANT = 0.8
#: Strides listed per stream, most frequent first.
TOP_STRIDES = 3

_SEQ, _STRIDED, _RANDOM = 0, 1, 2


def _records(store: Store, job_id: str) -> pa.Table:
    return store.query(
        """
        SELECT dense_rank() OVER (ORDER BY c.file_id, c.node, pid, rank, layer, c.op) - 1
            AS stream,
          c.file_id, c.node, coalesce(c.pid, -1) AS pid, coalesce(c.rank, -1) AS rank,
          coalesce(c.layer, '') AS layer, c.op,
          c."offset" AS off, c.size, c.stride, c.count
        FROM client_io c
        WHERE c.job_id = ? AND c.op IN ('read', 'write') AND c."offset" >= 0 AND c.count > 0
        ORDER BY stream, c.t_start, c."offset"
        """,
        [job_id],
    )


def classify(
    stream: np.ndarray, off: np.ndarray, size: np.ndarray, stride: np.ndarray, count: np.ndarray
) -> dict[str, np.ndarray]:
    """Per-record class counts of merged records sorted by stream, then time.

    Returns arrays over records: `seq`, `strided`, `random` (accesses of each class
    attributed to the record: its internal steps, the step into it from the previous
    record of its stream, and a stream's first access), and for the strided ones the
    `internal_stride` / `between_stride` with their counts (`n_internal_strided`,
    `n_between_strided`) so callers can tally strides.
    """
    n = len(off)
    stream = np.asarray(stream)
    off, size = np.asarray(off, np.int64), np.asarray(size, np.int64)
    stride, count = _ints(stride), np.asarray(count, np.int64)
    first = np.ones(n, bool)
    first[1:] = stream[1:] != stream[:-1]
    last = np.zeros(n, bool)
    last[:-1] = first[1:]
    if n:
        last[-1] = True
    last_off = off + (count - 1) * stride
    end = last_off + size
    multi = count >= 2

    def shift_prev(a: np.ndarray, fill: Any) -> np.ndarray:
        out = np.empty_like(a)
        out[0:1] = fill
        out[1:] = a[:-1]
        return out

    def shift_next(a: np.ndarray, fill: Any) -> np.ndarray:
        out = np.empty_like(a)
        out[-1:] = fill
        out[:-1] = a[1:]
        return out

    # the step from the previous record's last access into this record's first
    has_b = ~first
    d_b = off - shift_prev(last_off, 0)
    seq_b = has_b & (off == shift_prev(end, -1))
    prev_stride = np.where(shift_prev(multi, False) & has_b, shift_prev(stride, 0), np.nan)
    own_stride = np.where(multi, stride, np.nan)
    d_b_prev = np.where(shift_prev(has_b, False) & has_b, shift_prev(d_b, 0), np.nan)
    d_b_next = np.where(~last, shift_next(d_b, 0), np.nan)
    has_b_next = ~last
    d_b_f = d_b.astype(float)
    strided_b = (
        has_b & ~seq_b & ((d_b_f == prev_stride) | (d_b_f == own_stride) | (d_b_f == d_b_prev))
    )
    strided_b |= has_b & ~seq_b & has_b_next & (d_b_f == d_b_next)
    random_b = has_b & ~seq_b & ~strided_b

    # the record's own steps: count - 1 of them, all `stride`
    n_int = count - 1
    seq_i = multi & (stride == size)
    next_stride = np.where(shift_next(multi, False) & ~last, shift_next(stride, 0), np.nan)
    s_f = stride.astype(float)
    pair_repeats = (
        (has_b & (s_f == d_b_f))
        | (has_b_next & (s_f == d_b_next))
        | (s_f == prev_stride)
        | (s_f == next_stride)
    )
    strided_i = multi & ~seq_i & ((count >= 3) | pair_repeats)
    random_i = multi & ~seq_i & ~strided_i

    # a stream's first access: the class of the step after it
    own = np.where(seq_i, _SEQ, np.where(strided_i, _STRIDED, _RANDOM))
    nxt = np.where(
        shift_next(seq_b, False), _SEQ, np.where(shift_next(strided_b, False), _STRIDED, _RANDOM)
    )
    cls_first = np.where(multi, own, np.where(last, _SEQ, nxt))
    first_stride = np.where(multi, stride, shift_next(d_b, 0))

    seq = seq_b + np.where(seq_i, n_int, 0) + (first & (cls_first == _SEQ))
    strided = strided_b + np.where(strided_i, n_int, 0) + (first & (cls_first == _STRIDED))
    random = random_b + np.where(random_i, n_int, 0) + (first & (cls_first == _RANDOM))
    return {
        "seq": seq.astype(np.int64),
        "strided": strided.astype(np.int64),
        "random": random.astype(np.int64),
        "internal_stride": stride,
        "n_internal_strided": np.where(strided_i, n_int, 0)
        + (first & (cls_first == _STRIDED) & multi),
        "between_stride": d_b,
        "n_between_strided": strided_b.astype(np.int64),
        "first_stride": first_stride,
        "n_first_strided": (first & (cls_first == _STRIDED) & ~multi).astype(np.int64),
    }


@dataclass
class Survey:
    """A job's access patterns: the busiest streams and (file, op) rows, and how many."""

    streams: list[dict[str, Any]]
    files: list[dict[str, Any]]
    n_streams: int
    n_files: int


def survey(store: Store, job_id: str, limit: int | None = None) -> Survey:
    """Every stream of the job classified, then the `limit` busiest streams and files.

    Streams are rows as `access_patterns` returns them; files are what `by_file` makes of
    all streams, computed with arrays: an N-N job of 25,600 processes has 25,600 streams,
    and only the rows shown are built as dicts.
    """
    t = _records(store, job_id)
    if t.num_rows == 0:
        return Survey([], [], 0, 0)
    cols = {k: t.column(k).to_numpy(zero_copy_only=False) for k in t.column_names}
    stream = cols["stream"].astype(np.int64)
    heads = np.flatnonzero(np.r_[True, stream[1:] != stream[:-1]])
    n = len(heads)
    c = classify(stream, cols["off"], cols["size"], cols["stride"], cols["count"])
    count = cols["count"].astype(np.int64)

    def per_stream(a: np.ndarray) -> np.ndarray:
        return np.bincount(stream, weights=a, minlength=n).astype(np.int64)

    sums = {
        "accesses": per_stream(count),
        "bytes": per_stream(cols["size"].astype(np.int64) * count),
        "sequential": per_stream(c["seq"]),
        "strided": per_stream(c["strided"]),
        "random": per_stream(c["random"]),
    }
    owners, steps, weights = [], [], []
    for s_key, n_key in (
        ("internal_stride", "n_internal_strided"),
        ("between_stride", "n_between_strided"),
        ("first_stride", "n_first_strided"),
    ):
        w = np.asarray(c[n_key], np.int64)
        hit = w > 0
        owners.append(stream[hit])
        steps.append(np.asarray(c[s_key], np.int64)[hit])
        weights.append(w[hit])
    strides = _top_strides(np.concatenate(owners), np.concatenate(steps), np.concatenate(weights))

    file_ids = cols["file_id"][heads].astype(np.int64)
    # paths by id, not by a join: a dataset's files view then reads only these files
    known = file_layouts(store, np.unique(file_ids).tolist())
    paths = np.array(
        [known[f]["path"] if f in known else f"<file {f}>" for f in file_ids.tolist()],
        dtype=object,
    )
    ops = cols["op"][heads].astype(str)
    path_code = np.unique(paths, return_inverse=True)[1]
    op_code = np.unique(ops, return_inverse=True)[1]
    rank, pid = cols["rank"][heads].astype(np.int64), cols["pid"][heads].astype(np.int64)
    order = np.lexsort((op_code, pid, rank, path_code, -sums["accesses"]))[:limit]
    streams = [
        {
            "path": str(paths[i]),
            "file_id": int(file_ids[i]),
            "node": str(cols["node"][heads[i]]),
            "rank": int(rank[i]),  # -1: unknown
            "pid": int(pid[i]),  # -1: unknown
            "layer": str(cols["layer"][heads[i]]),
            "op": str(ops[i]),
            **{k: int(v[i]) for k, v in sums.items()},
            "strides": strides.of(i),
        }
        for i in order
    ]

    # per (file, op): the streams' sums and their listed strides, as `by_file` adds them
    keys = np.stack([file_ids, op_code.astype(np.int64)], axis=1)
    group = np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1)
    n_files = int(group.max()) + 1
    first = np.full(n_files, n, np.int64)
    np.minimum.at(first, group, np.arange(n))
    f_sums = {
        k: np.bincount(group, weights=v, minlength=n_files).astype(np.int64)
        for k, v in sums.items()
    }
    f_strides = _top_strides(group[strides.owner], strides.stride, strides.count)
    f_order = np.lexsort((op_code[first], path_code[first], -f_sums["accesses"]))[:limit]
    processes = np.bincount(group, minlength=n_files)
    files = [
        {
            "path": str(paths[first[g]]),
            "file_id": int(file_ids[first[g]]),
            "op": str(ops[first[g]]),
            "processes": int(processes[g]),
            **{k: int(v[g]) for k, v in f_sums.items()},
            "strides": f_strides.of(g),
        }
        for g in f_order
    ]
    for row in (*streams, *files):
        row["pattern"] = _pattern(row)
    return Survey(streams, files, n, n_files)


@dataclass
class _Strides:
    """The TOP_STRIDES most frequent strides of each owner (stream or file), as arrays
    sorted by owner, then count (descending), then stride."""

    owner: np.ndarray
    stride: np.ndarray
    count: np.ndarray

    def of(self, owner: int) -> list[dict[str, int]]:
        lo, hi = np.searchsorted(self.owner, [owner, owner + 1])
        return [
            {"stride": int(s), "count": int(k)}
            for s, k in zip(self.stride[lo:hi], self.count[lo:hi], strict=True)
        ]


def _top_strides(owner: np.ndarray, stride: np.ndarray, weight: np.ndarray) -> _Strides:
    """Sum `weight` per (owner, stride), then keep each owner's TOP_STRIDES."""
    if len(owner) == 0:
        empty = np.zeros(0, np.int64)
        return _Strides(empty, empty, empty)
    o = np.lexsort((stride, owner))
    owner, stride, weight = owner[o], stride[o], weight[o]
    new = np.r_[True, (owner[1:] != owner[:-1]) | (stride[1:] != stride[:-1])]
    starts = np.flatnonzero(new)
    owner, stride, total = owner[starts], stride[starts], np.add.reduceat(weight, starts)
    o = np.lexsort((stride, -total, owner))
    owner, stride, total = owner[o], stride[o], total[o]
    head = np.r_[True, owner[1:] != owner[:-1]]
    group_start = np.maximum.accumulate(np.where(head, np.arange(len(owner)), 0))
    keep = np.arange(len(owner)) - group_start < TOP_STRIDES
    return _Strides(owner[keep], stride[keep], total[keep])


def access_patterns(store: Store, job_id: str, limit: int | None = None) -> list[dict[str, Any]]:
    """One row per stream (file, process, layer, op) of the job, most accesses first.

    Row keys: `path`, `file_id`, `node`, `rank`, `pid`, `layer`, `op`, `accesses`,
    `bytes`, `sequential`, `strided`, `random` (access counts; they sum to `accesses`),
    `strides` (up to 3 `{stride, count}`, most frequent first) and `pattern`
    (`sequential`, `strided`, `random` or `mixed`: the class of >= 80 % of accesses).
    """
    return survey(store, job_id, limit).streams


def by_file(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The streams of `rows` summed per file and op, most accesses first.

    Keys: `path`, `file_id`, `op`, `processes` (streams: node, pid, rank, layer),
    `accesses`, `bytes`, `sequential`, `strided`, `random`, `strides` (up to 3, summed over
    the processes) and `pattern` (as for a stream).
    """
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for r in rows:
        f = out.setdefault(
            (r["file_id"], r["op"]),
            {
                "path": r["path"],
                "file_id": r["file_id"],
                "op": r["op"],
                "processes": 0,
                "accesses": 0,
                "bytes": 0,
                "sequential": 0,
                "strided": 0,
                "random": 0,
                "_strides": {},
            },
        )
        f["processes"] += 1
        for k in ("accesses", "bytes", "sequential", "strided", "random"):
            f[k] += r[k]
        for s in r["strides"]:
            f["_strides"][s["stride"]] = f["_strides"].get(s["stride"], 0) + s["count"]
    files = []
    for f in out.values():
        strides = sorted(f.pop("_strides").items(), key=lambda kv: (-kv[1], kv[0]))
        f["strides"] = [{"stride": s, "count": n} for s, n in strides[:TOP_STRIDES]]
        f["pattern"] = _pattern(f)
        files.append(f)
    files.sort(key=lambda f: (-f["accesses"], f["path"], f["op"]))
    return files


def _pattern(r: dict[str, Any]) -> str:
    shares = {k: r[k] for k in ("sequential", "strided", "random")}
    top = max(shares, key=lambda k: shares[k])
    return top if r["accesses"] and shares[top] >= DOMINANT * r["accesses"] else "mixed"


__all__ = ["Survey", "access_patterns", "by_file", "classify", "survey"]


def _ints(a: object) -> np.ndarray:
    """Integers with NULL (a record of one call has no stride) as 0; exact for int64."""
    arr = np.asarray(a)
    if arr.dtype.kind in "fO":  # NULLs came through as NaN or None
        return np.array([0 if v is None or v != v else int(v) for v in arr.tolist()], np.int64)
    return arr.astype(np.int64)
