"""X03: ranks' accesses to a shared file that never run at the same time (DXT).

For each file and direction DXT traced on two ranks or more, the ranks' busy intervals
(their DXT_POSIX segments, merged per rank) are compared with the file's: when their sum
hardly exceeds their union the ranks took turns. Merged runs only widen intervals, so a
"no overlap" verdict holds for the individual calls too. Turns taken back to back (the
file busy most of the time from its first to its last access), or while the same ranks'
MPI-IO calls overlapped, are queueing on a lock rather than a program's design.
"""

from __future__ import annotations

import posixpath
from typing import Any

import numpy as np
import pandas as pd

from iolens.analyze.darshan import groups
from iolens.analyze.darshan.expert import thresholds as th
from iolens.analyze.darshan.expert.common import (
    ExpertRule,
    figures,
    fs_type,
    name_of,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.analyze.darshan.zoomin.advice import setstripe, stripe_count_for
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: what each file-system type serialises writers on, and the way out
_ADVICE = {
    "nfs": (
        "ROMIO's NFS driver takes an fcntl lock around every write "
        "(ADIOI_NFS_WriteContig), so ranks sharing an NFS file write one at a time: put "
        "shared files on the parallel file system{parallel}, or write one file per rank "
        "(`MPI_File_open(MPI_COMM_SELF, name_of_rank, ...)`)"
    ),
    "lustre": (
        "the ranks' writes conflict on Lustre extent locks: align each rank's writes to the "
        "stripe size and stripe the file wider (`{setstripe}`), or write "
        "collectively (`MPI_File_write_all`) so aggregators own stripe-aligned domains"
    ),
    "gpfs": (
        "the ranks' writes conflict on GPFS byte-range tokens: align each rank's part to "
        "the file-system block size, or write collectively (`MPI_File_write_all`) so "
        "aggregators own block-aligned domains"
    ),
}
_DEFAULT = (
    "the file system serialises the ranks (locking): write collectively "
    "(`MPI_File_write_all`) so a few aggregators own disjoint aligned domains, or write one "
    "file per rank"
)
#: parallel file systems worth naming as a destination
_PARALLEL = ("lustre", "gpfs", "beegfs", "fuse.beegfs", "pvfs2", "orangefs", "daos", "wekafs")


#: the columns of `overlaps`
OVERLAP_COLUMNS = ["id", "op", "ranks", "ops", "busy", "union", "span", "overlap"]


def overlaps(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (file id, op) of DXT rows `frame` with two ranks or more, by id then op: ranks,
    operations, `busy` (per-rank busy seconds summed), `union` (seconds any rank was
    busy), `span` (first start to last end) and `overlap` ((busy - union) / busy: 0 when
    the ranks never overlapped). (numpy over the sorted rows, `groups`: the pandas groupby
    it replaces took milliseconds per figure on a few hundred DXT rows.)"""
    if not len(frame):
        return pd.DataFrame(columns=OVERLAP_COLUMNS)
    fid = frame["id"].to_numpy(np.uint64)
    names, op = np.unique(frame["op"].to_numpy(object), return_inverse=True)
    rank = frame["rank"].to_numpy(np.int64)
    start = frame["start"].to_numpy(float)
    end = frame["end"].to_numpy(float)
    count = frame["count"].to_numpy(np.int64) if "count" in frame else np.ones(len(fid), np.int64)
    # each rank's busy time: its intervals merged, per (file, op, rank), summed per (file, op)
    o = np.lexsort((start, rank, op, fid))
    per_rank = groups.starts_of(fid[o], op[o], rank[o])
    busy_rank = groups.union_seconds(groups.codes_of(per_rank, len(o)), start[o], end[o])
    at = groups.starts_of(fid[o][per_rank], op[o][per_rank])
    busy = groups.sums(busy_rank, at)
    ranks = np.diff(np.r_[at, len(per_rank)])
    first = o[per_rank[at]]  # a row of each (file, op), for its key
    # the file's busy time: every rank's intervals merged
    o = np.lexsort((start, op, fid))
    g = groups.starts_of(fid[o], op[o])
    union = groups.union_seconds(groups.codes_of(g, len(o)), start[o], end[o])
    ops = groups.sums(count[o], g)
    span = groups.maxima(end[o], g) - groups.minima(start[o], g)
    # only files and directions two ranks or more touched can show ranks taking turns
    keep = ranks >= 2
    if not keep.any():
        return pd.DataFrame(columns=OVERLAP_COLUMNS)
    with np.errstate(divide="ignore", invalid="ignore"):
        overlap = np.where(busy > 0, (busy - union) / busy, 0.0)
    return pd.DataFrame(
        {
            "id": fid[first][keep],
            "op": names[op[first][keep]],
            "ranks": ranks[keep].astype(np.int64),
            "ops": ops[keep],
            "busy": busy[keep],
            "union": union[keep],
            "span": span[keep],
            "overlap": overlap[keep],
        }
    )


def serialised_files(job: DarshanJob, ctx: RuleContext) -> list[dict[str, Any]]:
    """Files and directions whose ranks took turns, with the figures that show it."""
    fig = figures(job, ctx)
    if "serialised" not in fig.memo:
        fig.memo["serialised"] = _serialised(job, ctx)
    return fig.memo["serialised"]


def _serialised(job: DarshanJob, ctx: RuleContext) -> list[dict[str, Any]]:
    d = job.dxt
    if d is None or not len(d):
        return []
    bar = th.get("SERIAL_OVERLAP", ctx.extra)
    duty_bar = th.get("SERIAL_DUTY", ctx.extra)
    posix = overlaps(d[d["module"] == "DXT_POSIX"])
    mpi = overlaps(d[d["module"] == "DXT_MPIIO"])
    posix = posix[(posix["ranks"] >= 2) & (posix["busy"] > 0) & (posix["overlap"] <= bar)]
    # (ranks, overlap) of MPI-IO per (file, op)
    mpi_of = {
        (int(i), str(o)): (int(n), float(x))
        for i, o, n, x in zip(mpi["id"], mpi["op"], mpi["ranks"], mpi["overlap"], strict=True)
    }
    out = []
    for row in posix.itertuples(index=False):
        rid, op = int(row.id), str(row.op)
        duty = float(row.union / row.span) if row.span > 0 else 1.0
        m = mpi_of.get((rid, op))
        mpi_overlap = m[1] if m is not None and m[0] >= 2 else None
        if duty < duty_bar and not (mpi_overlap is not None and mpi_overlap > bar):
            continue
        out.append(
            {
                "id": rid,
                "path": name_of(job, rid),
                "op": op,
                "ranks": int(row.ranks),
                "operations": int(row.ops),
                "busy_s": round(float(row.busy), 6),
                "union_s": round(float(row.union), 6),
                "span_s": round(float(row.span), 6),
                "overlap_share": round(float(row.overlap), 4),
                "duty": round(duty, 4),
                "mpiio_overlap_share": None if mpi_overlap is None else round(mpi_overlap, 4),
            }
        )
    return out


def _top_layer_seconds(job: DarshanJob, ctx: RuleContext, rid: int, op: str) -> float:
    """Seconds the application spent in `op` calls on file `rid`: MPI-IO's when the file
    was opened through MPI-IO, else POSIX's."""
    key = "read_time" if op == "read" else "write_time"
    fig = figures(job, ctx)
    for r in (fig.mpi, fig.posix):
        mine = r[r["id"] == rid] if len(r) else r
        if len(mine):
            return float(mine[key].sum())
    return 0.0


class SerialisedAccess(ExpertRule):
    """Ranks access a shared file one at a time.

    Symptom: in DXT, the operations of two or more ranks on one file in one direction
    overlap for at most 10 % of their summed time (Drishti's share bar; 0 is fully
    serialised), while the file is busy for at least half of the span from its first to
    its last operation or the same ranks' MPI-IO calls overlap: the ranks queued.
    Why it hurts: N ranks then write at one rank's speed; every rank waits for the others'
    turns, which shows as MPI-IO time far above POSIX time and as slow ranks on shared
    files. File locking does it: ROMIO's NFS driver locks every write (ad_nfs_write.c,
    ADIOI_NFS_WriteContig), Lustre extent locks
    and GPFS tokens bounce between ranks writing the same stripes or blocks.
    What to do: on NFS, put shared files on the parallel file system; elsewhere align each
    rank's part to the stripe or block size, or write collectively (`MPI_File_write_all`),
    or write one file per rank.
    """

    code = "X03"
    name = "serialised-shared-access"
    severity = "warning"
    thresholds = ("SERIAL_OVERLAP", "SERIAL_DUTY")
    basis = "time"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        files = serialised_files(job, ctx)
        if not files:
            return None
        for f in files:
            f["app_seconds"] = round(_top_layer_seconds(job, ctx, f["id"], f["op"]), 6)
            f["fs"] = fs_type(job, f["path"])
        seconds = float(sum(f["app_seconds"] for f in files))
        io = figures(job, ctx).app_io_time
        share = seconds / io if io > 0 else 0.0
        worst = max(files, key=lambda f: (f["app_seconds"], f["ranks"]))
        fs = worst["fs"]
        parallel = sorted({m for m, k in job.mounts if k in _PARALLEL})
        base = posixpath.basename(worst["path"])
        where = f' (`MPI_File_open(comm, "{parallel[0]}/.../{base}", ...)`)' if parallel else ""
        recs = figures(job, ctx).fs
        top = recs.loc[recs["id"] == worst["id"], "max_byte"]
        size = float(top.max()) + 1 if len(top) else 0.0
        k = stripe_count_for(size, ctx.ost_total, at_least=2)
        advice = _ADVICE.get(fs or "", _DEFAULT).format(
            parallel=where, setstripe=setstripe(job, worst["path"], k)
        )
        full = "fully " if worst["overlap_share"] == 0 else ""
        rec = (
            f"The {worst['ranks']} ranks' {worst['op']}s to {worst['path']} were {full}"
            f"serialised (overlap {worst['overlap_share']:.0%}, file busy "
            f"{worst['duty']:.0%} of the time){f' on {fs}' if fs else ''}: {advice}."
        )
        evidence = {
            "files": [{k: v for k, v in f.items() if k != "id"} for f in files[:5]],
            "serialised_files": len(files),
            "ranks": max(f["ranks"] for f in files),
            "seconds": round(seconds, 6),
            "io_time_s": round(io, 6),
            "share_of_io_time": round(share, 4),
        }
        return self.finding(
            job,
            evidence,
            rec,
            severity=self.severity_for(ctx, share, seconds=seconds),
            # queued ranks show as MPI-IO time above POSIX (X04) and as shared-file
            # stragglers (DP19)
            explains=["X04", "DP19"],
        )
