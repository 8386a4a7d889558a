"""Counters -> client_io: rows that reproduce each counter record's op counts and bytes
exactly, for the files and directions DXT did not cover."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from iolens.ingest.darshan_records import Block
from iolens.ingest.importers.darshan_context import LogContext
from iolens.ingest.importers.darshan_ranks import RankPlan
from iolens.model.schema import CLIENT_IO

#: most client rows one log's shared records are spread into (see `_spread`)
SPREAD_ROWS = 262_144


@dataclass(frozen=True)
class Layer:
    """How a counter module's records become client_io rows."""

    name: str  # client_io.layer
    prefix: str  # counter prefix (MPIIO for the MPI-IO module)
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    md: dict[str, tuple[str, ...]]


LAYERS = {
    "POSIX": Layer(
        "posix",
        "POSIX",
        ("READS",),
        ("WRITES",),
        {
            "open": ("OPENS",),
            "stat": ("STATS",),
            "seek": ("SEEKS",),
            "mmap": ("MMAPS",),
            "fsync": ("FSYNCS", "FDSYNCS"),
            "dup": ("DUPS",),
            "rename": ("RENAME_SOURCES",),
        },
    ),
    "STDIO": Layer(
        "stdio",
        "STDIO",
        ("READS",),
        ("WRITES",),
        {"open": ("OPENS",), "seek": ("SEEKS",), "flush": ("FLUSHES",)},
    ),
    "MPI-IO": Layer(
        "mpiio",
        "MPIIO",
        ("INDEP_READS", "COLL_READS", "SPLIT_READS", "NB_READS"),
        ("INDEP_WRITES", "COLL_WRITES", "SPLIT_WRITES", "NB_WRITES"),
        {"open": ("INDEP_OPENS", "COLL_OPENS"), "fsync": ("SYNCS",)},
    ),
    "DFS": Layer(
        "dfs",
        "DFS",
        ("READS", "READXS"),
        ("WRITES", "WRITEXS"),
        {"open": ("OPENS",), "stat": ("LOOKUPS", "STATS", "GET_SIZES"), "unlink": ("REMOVES",)},
    ),
}


def counter_io(ctx: LogContext) -> pa.Table | None:
    """Client records from the counters: each file's metadata at the lowest layer that
    saw it, its data where `mpiio_owned` and DXT coverage say."""
    tables = []
    for module, layer in LAYERS.items():
        b = ctx.blocks.get(module)
        if b is None or not len(b):
            continue
        md_ok = np.ones(len(b), bool)
        data_ok = {op: np.ones(len(b), bool) for op in ("read", "write")}
        for op in data_ok:
            owned = _isin(b.ids, ctx.mpiio_data[op])
            if module == "POSIX":
                data_ok[op] = ~owned
            elif module == "MPI-IO":
                data_ok[op] = owned
            data_ok[op] &= ~_isin(b.ids, ctx.dxt_cov.get((module, op), set()))
        if module == "MPI-IO":  # opens of files POSIX saw are counted there
            md_ok = ~_isin(b.ids, ctx.posix_ids)
        t = _synthesize(ctx, layer, b, md_ok, data_ok)
        if t is not None:
            tables.append(t)
    return pa.concat_tables(tables) if tables else None


def _isin(ids: np.ndarray, values: set[int]) -> np.ndarray:
    return np.isin(ids, np.fromiter(values, np.uint64, len(values)))


def _synthesize(
    ctx: LogContext, layer: Layer, b: Block, md_ok: np.ndarray, data_ok: dict[str, np.ndarray]
) -> pa.Table | None:
    """Rows that reproduce each record's op counts and bytes exactly.

    Per record and op: `count - 1` ops of the mean size rounded down, plus one op with the
    rest of the bytes. A shared record's (rank -1: Darshan summed all ranks) data goes to
    the ranks its counters name (`darshan_ranks`); its metadata ops, and the data of a
    record whose rank counters are missing, spread evenly (`_spread`). Times are the record's
    first-start / last-end timestamps of that kind of op; durations its cumulative
    read / write / metadata time, split in proportion to the op counts.
    """
    p = layer.prefix

    def col(name: str) -> np.ndarray:
        return np.clip(b.col(f"{p}_{name}"), 0, None)  # older formats use -1: unknown

    n = len(b)
    run_end = np.full(n, max(ctx.job.run_time, 0.0))
    last = np.max([col(f"F_{k}_END_TIMESTAMP") for k in ("OPEN", "READ", "WRITE", "CLOSE")], 0)

    def window(kind: str) -> tuple[np.ndarray, np.ndarray]:
        t0, t1 = col(f"F_{kind}_START_TIMESTAMP"), col(f"F_{kind}_END_TIMESTAMP")
        missing = (t0 <= 0) & (t1 <= 0)
        return np.where(missing, 0.0, t0), np.where(missing, run_end, np.maximum(t1, t0))

    ops, counts, nbytes, t0s, t1s, durs = [], [], [], [], [], []
    for op, names, what in (("read", layer.reads, "READ"), ("write", layer.writes, "WRITTEN")):
        kind = "READ" if op == "read" else "WRITE"
        t0, t1 = window(kind)
        ops.append(np.full(n, op))
        counts.append(np.sum([col(k) for k in names], axis=0) * data_ok[op])
        nbytes.append(col(f"BYTES_{what}") * data_ok[op])
        t0s.append(t0)
        t1s.append(t1)
        durs.append(col(f"F_{kind}_TIME"))
    md = {op: np.sum([col(k) for k in ks], axis=0) * md_ok for op, ks in layer.md.items()}
    md_total = np.sum(list(md.values()), axis=0)
    meta = col("F_META_TIME")
    open0, open1 = window("OPEN")
    for op, cnt in md.items():
        ops.append(np.full(n, op))
        counts.append(cnt)
        nbytes.append(np.zeros(n, np.int64))
        t0s.append(open0)
        t1s.append(open1 if op == "open" else np.where(last > 0, np.maximum(last, open1), run_end))
        durs.append(meta * np.divide(cnt, md_total, out=np.zeros(n), where=md_total > 0))
    k = len(ops)
    it = {
        "op": np.concatenate(ops),
        "count": np.concatenate(counts).astype(np.int64),
        "bytes": np.concatenate(nbytes).astype(np.int64),
        "t0": np.concatenate(t0s),
        "t1": np.concatenate(t1s),
        "dur": np.concatenate(durs),
        "rank": np.tile(b.ranks, k),
        "id": np.tile(b.ids, k),
    }
    split = np.tile(np.arange(n), k)  # each row's record, for its rank split
    live = (it["count"] > 0) | (it["bytes"] > 0)
    if not live.any():
        return None
    it, split = {name: v[live] for name, v in it.items()}, split[live]
    data = (it["op"] == "read") | (it["op"] == "write")
    plan = RankPlan.of(b, p, ctx.job.nprocs)
    known = data & (it["rank"] < 0) & plan.known[split]
    parts = [_spread(ctx, {name: v[~known] for name, v in it.items()})]
    if known.any():
        shared = {name: v[known] for name, v in it.items()}
        parts.append(plan.apply(shared, split[known], SPREAD_ROWS))
    return _rows(ctx, layer.name, {name: np.concatenate([q[name] for q in parts]) for name in it})


def _spread(ctx: LogContext, it: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One share per rank: shared records (rank -1) over min(nprocs, ops) ranks (every
    rank opened a shared file; for data, only where Darshan did not name the ranks), and over
    fewer (evenly spaced) when a huge job has many shared files, so a log stays within
    `SPREAD_ROWS` shares."""
    nprocs = max(ctx.job.nprocs, 1)
    cnt = it["count"]
    shared = it["rank"] < 0
    k = np.where(shared, np.clip(cnt, 1, nprocs), 1)
    if k.sum() > SPREAD_ROWS:
        k = np.where(shared, np.minimum(k, max(1, SPREAD_ROWS // max(int(shared.sum()), 1))), 1)
    rep = np.repeat(np.arange(len(cnt)), k)
    j = np.arange(len(rep)) - np.repeat(np.cumsum(k) - k, k)
    kk = k[rep]
    c, b = cnt[rep], it["bytes"][rep]
    share_c = c // kk + (j < c % kk)
    share_b = b // kk + (j < b % kk)
    weight = np.divide(share_c, c, out=1.0 / kk, where=c > 0)
    out = {name: v[rep] for name, v in it.items()}
    out.update(
        rank=np.where(shared[rep], j * nprocs // kk, out["rank"]),
        count=share_c,
        bytes=share_b,
        dur=out["dur"] * weight,
    )
    return out


def _rows(ctx: LogContext, layer: str, s: dict[str, np.ndarray]) -> pa.Table:
    """Shares -> rows: data ops as (count-1) x floor + 1 x remainder; metadata as is."""
    cnt, nbytes = s["count"], s["bytes"]
    data = (s["op"] == "read") | (s["op"] == "write")
    q = np.where(cnt > 0, nbytes // np.maximum(cnt, 1), nbytes)
    rest = nbytes - q * np.maximum(cnt - 1, 0)
    uniform = ~data | (cnt <= 1) | (rest == q)
    tail = ~uniform
    idx = np.r_[np.arange(len(cnt)), np.flatnonzero(tail)]
    count = np.r_[np.where(uniform, np.maximum(cnt, 1), cnt - 1), np.ones(int(tail.sum()), int)]
    size = np.r_[np.where(data, np.where(cnt <= 1, nbytes, q), 0), rest[tail]]
    frac = count / np.maximum(cnt[idx], 1)
    ranks = s["rank"][idx]
    nrows = len(idx)
    fids = {int(r): ctx.fid(int(r)) for r in np.unique(s["id"])}
    hosts = {int(r): ctx.hosts.get(int(r), "") for r in np.unique(ranks)}
    with np.errstate(invalid="ignore", over="ignore"):  # a damaged log's NaN/inf times
        busy = np.nan_to_num(np.clip(s["dur"][idx] * frac, 0, 1e9), posinf=1e9)
    return pa.table(
        {
            "job_id": pa.array([ctx.job.job_id] * nrows, pa.string()),
            "node": np.array([hosts[int(r)] for r in ranks], object),
            "rank": ranks.astype(np.int32),
            "pid": (np.full(nrows, ctx.pid) if ctx.pid is not None else ranks).astype(np.int32),
            "layer": pa.array([layer] * nrows, pa.string()),
            "op": s["op"][idx].astype(object),
            "file_id": np.array([fids[int(r)] for r in s["id"][idx]], np.int64),
            "offset": np.full(nrows, -1, np.int64),
            "size": size.astype(np.int64),
            "stride": np.where(data[idx], size, 0).astype(np.int64),
            "count": count.astype(np.int64),
            "t_start": ctx.ts(s["t0"][idx]),
            "t_end": ctx.ts(np.maximum(s["t1"][idx], s["t0"][idx])),
            "dur_ns": np.rint(busy * 1e9).astype(np.int64),
        },
        schema=CLIENT_IO,
    )
