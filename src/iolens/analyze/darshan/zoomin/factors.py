"""The 15 factors of the zoom-in paper's Table I, and the job's bandwidth, from one log.

Definitions and the estimates Darshan's counters force:

- **bandwidth** is the job's one bandwidth (`iolens.analyze.bandwidth`, the figure every
  report shows): bytes / I/O time of the slowest rank, `darshan-parser --perf`'s
  `agg_perf_by_slowest` at the layer the application called (MPI-IO for files written
  through it). It is what `darshan-job-summary` reports, so figures compare with what
  users already see.
- **I/O time** (`io_time`, what the rules weigh) is the same "by slowest" time over the
  data modules below, never above the log's run time.
- **Modules**: POSIX and STDIO (what reaches the files); MPI-IO only when neither exists,
  since it sits on POSIX and would count bytes twice. The standard streams are left out
  (`records.py`).
- **Per-rank figures** (MaxRankIO, MaxRankReq, metadata share): a shared record (rank -1)
  holds the sum over the ranks sharing it. Its bytes are given to ranks by the DXT trace
  when the file has one, else its fastest and slowest ranks get their recorded bytes and
  the rest is spread evenly; requests follow the bytes. So rank 0 reading a 65 GB shared
  file alone (the paper's Combustion1) shows up as MaxRankIO near 1.
- **mtime_pct** is the metadata share of I/O time per rank, summed over ranks: both sides
  of the ratio are per-rank times, never a shared record's summed metadata time against
  one rank's wall clock (Drishti's defect).
- **OST distribution** (max_ost_io, max_ost_req): each file's bytes and requests are
  spread over its OSTs in proportion to how many `stripe_size` chunks of its extent
  (largest offset + 1) fall on each, round robin in layout order; a file smaller than a
  stripe lands on its first OST. That assumes accesses cover the extent uniformly, which
  holds for checkpoints and whole-file reads, not for sparse access. Files without a
  Lustre layout are left out.
- **collective** is 1 when any MPI-IO read or write was collective (`*_COLL_*`, or the
  split collectives `*_SPLIT_*`), else 0 (also without MPI-IO).
- **small_pct** counts requests under 1 KiB in POSIX's size histograms (MPI-IO's when the
  log has no POSIX module); STDIO keeps no histograms. **seq_pct** is POSIX's
  `SEQ_READS + SEQ_WRITES` over its reads and writes.
- **nnodes**: distinct DXT host names, else the scheduler's node list when the caller has
  it, else null (Darshan does not record nodes).
- **Weather** (factors 13-15) come from `weather_before`; null without server data.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from iolens.analyze.bandwidth import Bandwidth, of_log
from iolens.analyze.darshan.zoomin.files import layouts
from iolens.analyze.darshan.zoomin.records import data_records, dxt_bytes
from iolens.model.darshan import DarshanJob
from iolens.model.schema import JOB_FACTORS, ZOOMIN_FACTORS

#: Factor columns of JOB_FACTORS, in Table I order.
FACTORS = ZOOMIN_FACTORS

_SMALL_BINS = ("0_100", "100_1K")  # Darshan's request-size bins below 1 KiB
_BINS = (
    "0_100",
    "100_1K",
    "1K_10K",
    "10K_100K",
    "100K_1M",
    "1M_4M",
    "4M_10M",
    "10M_100M",
    "100M_1G",
    "1G_PLUS",
)


@dataclass
class RankLoad:
    """Per-rank bytes, requests, I/O time and metadata time (index = rank)."""

    bytes: np.ndarray
    requests: np.ndarray
    time: np.ndarray
    meta: np.ndarray


def _nranks(job: DarshanJob, recs: pd.DataFrame) -> int:
    top = int(recs["rank"].max()) + 1 if len(recs) else 0
    return max(job.nprocs, top, 1)


def _dxt_shares(job: DarshanJob, n: int, module: str) -> dict[int, np.ndarray]:
    """Per-rank byte shares of each file from its DXT segments (file id -> shares)."""
    dxt = job.dxt
    mod = {"POSIX": "DXT_POSIX", "MPI-IO": "DXT_MPIIO"}.get(module)
    if dxt is None or mod is None or not len(dxt):
        return {}
    d = dxt[(dxt["module"] == mod) & (dxt["rank"] >= 0) & (dxt["rank"] < n)]
    d = d.assign(nbytes=dxt_bytes(d))
    out: dict[int, np.ndarray] = {}
    for fid, grp in d.groupby("id"):
        per = grp.groupby("rank")["nbytes"].sum()
        tot = float(per.sum())
        if tot > 0:
            w = np.zeros(n)
            w[per.index.to_numpy(dtype=np.int64)] = per.to_numpy(dtype=float) / tot
            out[int(fid)] = w
    return out


def _split(total: float, n: int, fixed: Mapping[int, float]) -> np.ndarray:
    """`total` over n ranks: the `fixed` ranks get their values, the rest share evenly."""
    fixed = {r: v for r, v in fixed.items() if 0 <= r < n}
    rest = total - sum(fixed.values())
    others = n - len(fixed)
    if rest < -1e-9 * max(total, 1.0) or (others == 0 and rest > 1e-9 * max(total, 1.0)):
        return np.full(n, total / n)  # inconsistent counters: fall back to even
    w = np.full(n, max(rest, 0.0) / others if others else 0.0)
    for r, v in fixed.items():
        w[r] = v
    return w


def rank_load(job: DarshanJob, recs: pd.DataFrame | None = None) -> RankLoad:
    """Per-rank load; shared records are apportioned as the module docstring says (of the
    job's own records: built once per log, a copy for each caller)."""
    if recs is None:
        load = job.derived(("rank_load", id(job.dxt)), lambda: _rank_load(job, data_records(job)))
        return RankLoad(*(a.copy() for a in (load.bytes, load.requests, load.time, load.meta)))
    return _rank_load(job, recs)


def _rank_load(job: DarshanJob, recs: pd.DataFrame) -> RankLoad:
    n = _nranks(job, recs)
    load = RankLoad(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n))
    own = recs[recs["rank"] >= 0]
    if len(own):
        ranks = own["rank"].to_numpy(dtype=np.int64)
        np.add.at(load.bytes, ranks, own["bytes"].to_numpy(dtype=float))
        np.add.at(load.requests, ranks, own["requests"].to_numpy(dtype=float))
        np.add.at(load.time, ranks, own["io_time"].to_numpy(dtype=float))
        np.add.at(load.meta, ranks, own["meta_time"].to_numpy(dtype=float))
    shared = recs[recs["rank"] < 0]
    dxt: dict[str, dict[int, np.ndarray]] = {}
    for rec in shared.itertuples(index=False):
        if rec.module not in dxt:
            dxt[rec.module] = _dxt_shares(job, n, rec.module)
        b = float(rec.bytes)
        shares = dxt[rec.module].get(int(rec.id))
        if shares is None:
            fixed = {int(rec.fastest_rank): float(rec.fastest_bytes)}
            fixed[int(rec.slowest_rank)] = float(rec.slowest_bytes)
            per = _split(b, n, fixed) if b > 0 else np.zeros(n)
            shares = per / b if b > 0 else np.full(n, 1.0 / n)
        load.bytes += b * shares
        load.requests += float(rec.requests) * shares
        tfixed = {int(rec.fastest_rank): float(rec.fastest_time)}
        tfixed[int(rec.slowest_rank)] = float(rec.slowest_time)
        load.time += _split(float(rec.io_time), n, tfixed)
        load.meta += float(rec.meta_time) / n
    return load


def io_time(job: DarshanJob, recs: pd.DataFrame | None = None) -> float:
    """Darshan's "by slowest" I/O time: slowest rank on its own files + shared files' slowest."""
    recs = data_records(job) if recs is None else recs
    own = recs[recs["rank"] >= 0]
    slowest = float(own.groupby("rank")["io_time"].sum().max()) if len(own) else 0.0
    t = slowest + float(recs.loc[recs["rank"] < 0, "slowest_time"].sum())
    # the shared files' slowest ranks add up (Darshan's bound): never past the run
    return min(t, job.run_time) if job.run_time > 0 else t


def ost_load(job: DarshanJob, recs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Bytes, requests and file count per OST (columns ost, bytes, requests, files).

    Each file's chunks of `stripe_size` over [0, extent) go round robin over its OSTs in
    layout order, so OST position i of c gets q + (i < r) of n chunks (n = q * c + r).
    """
    recs = data_records(job) if recs is None else recs
    lay = layouts(job)
    cols = ["ost", "bytes", "requests", "files"]
    if not len(lay) or not len(recs):
        return pd.DataFrame(columns=cols)
    per = recs.groupby("id", as_index=False).agg(
        bytes=("bytes", "sum"), requests=("requests", "sum"), max_byte=("max_byte", "max")
    )
    per["id"] = per["id"].astype(np.uint64)
    f = lay.merge(per, on="id", how="inner")
    f = f[f["osts"].map(len) > 0].reset_index(drop=True)
    if not len(f):
        return pd.DataFrame(columns=cols)
    c = f["osts"].map(len).to_numpy(dtype=np.int64)
    extent = np.where(f["max_byte"] > 0, f["max_byte"] + 1, 0).astype(np.int64)
    ss = f["stripe_size"].fillna(0).to_numpy(dtype=np.int64)
    n = np.where((ss > 0) & (extent > 0), -(-extent // np.maximum(ss, 1)), 1)
    n = np.maximum(n, 1)
    q, r = n // c, n % c
    pos = np.concatenate([np.arange(k) for k in c])
    row = np.repeat(np.arange(len(f)), c)
    share = (q[row] + (pos < r[row])) / n[row]
    ost = np.fromiter((int(o) for os_ in f["osts"] for o in os_), dtype=np.int64, count=len(pos))
    out = pd.DataFrame(
        {
            "ost": ost,
            "bytes": f["bytes"].to_numpy(dtype=float)[row] * share,
            "requests": f["requests"].to_numpy(dtype=float)[row] * share,
            "files": (share > 0).astype(np.int64),
        }
    )
    return out.groupby("ost", as_index=False).sum()[cols]


def node_count(job: DarshanJob, nodes: Sequence[str] | int | None = None) -> int | None:
    """Distinct DXT host names, else the scheduler's node list the caller passes, else None."""
    if job.dxt is not None and len(job.dxt) and "hostname" in job.dxt.columns:
        hosts = {h for h in job.dxt["hostname"].unique() if h}
        if hosts:
            return len(hosts)
    if isinstance(nodes, int):
        return nodes
    if nodes is not None:
        return len(set(nodes))
    return None


def app_name(exe: str) -> str:
    """The executable's base name (Darshan's `exe` is the whole command line)."""
    first = exe.split()[0] if exe.strip() else ""
    return os.path.basename(first)


def _share(num: float, den: float, scale: float = 1.0) -> float | None:
    return scale * num / den if den > 0 else None


def _histogram(job: DarshanJob) -> tuple[float, float] | None:
    """(small requests, all requests) from the POSIX size histograms (MPI-IO as fallback)."""
    for mod, prefix in (("POSIX", "POSIX_SIZE_"), ("MPI-IO", "MPIIO_SIZE_")):
        c = job.counters(mod)
        if not len(c):
            continue
        agg = "_AGG" if mod == "MPI-IO" else ""
        names = [f"{prefix}{op}{agg}_{b}" for op in ("READ", "WRITE") for b in _BINS]
        names = [x for x in names if x in c.columns]
        if not names:
            continue
        total = float(c[names].clip(lower=0).to_numpy().sum())
        small = [f"{prefix}{op}{agg}_{b}" for op in ("READ", "WRITE") for b in _SMALL_BINS]
        return float(c[[x for x in small if x in c.columns]].clip(lower=0).to_numpy().sum()), total
    return None


def _seq(job: DarshanJob) -> float | None:
    c = job.counters("POSIX")
    if not len(c) or "POSIX_SEQ_READS" not in c.columns:
        return None
    seq = float(c[["POSIX_SEQ_READS", "POSIX_SEQ_WRITES"]].clip(lower=0).to_numpy().sum())
    ops = float(c[["POSIX_READS", "POSIX_WRITES"]].clip(lower=0).to_numpy().sum())
    return _share(seq, ops, 100.0)


def _collective(job: DarshanJob) -> float:
    c = job.counters("MPI-IO")
    cols = [
        x
        for x in (
            "MPIIO_COLL_READS",
            "MPIIO_COLL_WRITES",
            "MPIIO_SPLIT_READS",
            "MPIIO_SPLIT_WRITES",
        )
        if x in c.columns
    ]
    return 1.0 if len(c) and float(c[cols].clip(lower=0).to_numpy().sum()) > 0 else 0.0


def job_factors(
    job: DarshanJob,
    weather: Mapping[str, float | None] | None = None,
    *,
    nodes: Sequence[str] | int | None = None,
    user: str | None = None,
    app: str | None = None,
) -> dict[str, Any]:
    """Table I for one job, plus `bandwidth` (bytes/s): a row of JOB_FACTORS (no `computed`).

    `nodes` is the scheduler's node list (or count), used when the log has no DXT host
    names; `user` and `app` default to the log's uid and executable name.
    """
    recs = data_records(job)
    return factors_from(
        job, recs, rank_load(job, recs), ost_load(job, recs), weather, nodes, user, app
    )


def factors_from(
    job: DarshanJob,
    recs: pd.DataFrame,
    load: RankLoad,
    osts: pd.DataFrame,
    weather: Mapping[str, float | None] | None = None,
    nodes: Sequence[str] | int | None = None,
    user: str | None = None,
    app: str | None = None,
    bw: Bandwidth | None = None,
) -> dict[str, Any]:
    """`job_factors` from parts already computed (the rules' shared analysis has them)."""
    bw = bw if bw is not None else of_log(job)
    datasize = float(recs["bytes"].sum()) if len(recs) else 0.0
    lay = layouts(job)
    hist = _histogram(job)
    w = weather or {}
    ost_ids = {int(o) for os_ in lay["osts"] for o in os_} if len(lay) else set()
    return {
        "job_id": job.job_id,
        "user": user if user is not None else str(job.uid),
        "app": app if app is not None else app_name(job.exe),
        "bandwidth": bw.bw or None,
        "datasize": datasize,
        "nprocs": float(job.nprocs),
        "nnodes": _f(node_count(job, nodes)),
        "mtime_pct": _share(float(load.meta.sum()), float(load.time.sum()), 100.0),
        "collective": _collective(job),
        "ost_count": float(len(ost_ids)) if ost_ids else None,
        "small_pct": _share(hist[0], hist[1], 100.0) if hist else None,
        "seq_pct": _seq(job),
        "max_rank_io": _share(float(load.bytes.max()), float(load.bytes.sum())),
        "max_rank_req": _share(float(load.requests.max()), float(load.requests.sum())),
        "max_ost_io": _share(float(osts["bytes"].max()), float(osts["bytes"].sum()))
        if len(osts)
        else None,
        "max_ost_req": _share(float(osts["requests"].max()), float(osts["requests"].sum()))
        if len(osts)
        else None,
        "oss_cpu_pct": _f(w.get("oss_cpu_pct")),
        "mds_cpu_pct": _f(w.get("mds_cpu_pct")),
        "ost_io_mb": _f(w.get("ost_io_mb")),
    }


def _f(v: float | int | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def factors_table(rows: Sequence[Mapping[str, Any]], computed: datetime | None = None) -> pa.Table:
    """`job_factors` rows as a JOB_FACTORS table, stamped with `computed` (default now)."""
    when = computed or datetime.now(UTC).replace(tzinfo=None)
    names = JOB_FACTORS.names
    data = [{k: (r.get(k) if k != "computed" else when) for k in names} for r in rows]
    return pa.Table.from_pylist(data, schema=JOB_FACTORS)
