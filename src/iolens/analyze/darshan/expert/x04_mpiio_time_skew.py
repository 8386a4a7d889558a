"""X04: time in MPI-IO calls far beyond the POSIX time underneath them.

Per file both modules recorded, MPI-IO's read+write time against POSIX's on the same
record id. The difference is spent inside ROMIO but outside the file system: collective
calls waiting for the last rank and exchanging data between aggregators (two-phase I/O),
lock waits of data sieving, ranks queueing on a serialised file. Open/close/sync time is
reported but not compared: old big-endian logs hold garbage in POSIX_F_META_TIME.
"""

from __future__ import annotations

import pandas as pd

from iolens.analyze.darshan.drishti.common import node_count
from iolens.analyze.darshan.drishti.thresholds import SMALL_BYTES
from iolens.analyze.darshan.expert.common import ExpertRule, figures, fs_type, name_of
from iolens.analyze.darshan.expert.x03_serialised_access import serialised_files
from iolens.analyze.darshan.expert.x05_single_aggregator import single_aggregator_files
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class MpiioTimeSkew(ExpertRule):
    """Most of the time in MPI-IO is not spent in the file system.

    Symptom: on files recorded by both MPI-IO and POSIX, MPI-IO's read and write time is
    at least twice the POSIX read and write time beneath it (the part outside POSIX is at
    least half), e.g. 753 s in MPI-IO over 264 s in POSIX.
    Why it hurts: that time is synchronisation, not I/O: collective calls wait for the
    slowest rank to arrive and shuffle data to the aggregators (two-phase I/O), data
    sieving waits for file locks, and ranks queue on a file that serialises them. Faster
    storage would not shorten it.
    What to do: find which: serialised ranks (X03) or a single aggregator (X05) if
    reported; otherwise balance the work before collective calls (their time includes the
    wait for the last rank), make fewer and larger collective calls, and give each node
    one aggregator (`cb_nodes` = node count); for independent writes turn data sieving off
    (`romio_ds_write=disable`).
    """

    code = "X04"
    name = "mpiio-time-skew"
    severity = "warning"
    thresholds = ("SKEW_SHARE",)
    basis = "time"
    target = "developer"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        fig = figures(job, ctx)
        lay = fig.layers
        if len(lay):
            # without POSIX data calls the layer beneath was not traced (OMPIO's own
            # fbtl, DAOS): there is nothing to compare with
            lay = lay[lay["p_reads"] + lay["p_writes"] > 0]
        if not len(lay):
            return None
        m_t = lay["m_read_time"] + lay["m_write_time"]
        p_t = lay["p_read_time"] + lay["p_write_time"]
        skew_f = (m_t - p_t).clip(lower=0)
        mpi, posix, skew = float(m_t.sum()), float(p_t.sum()), float(skew_f.sum())
        if mpi <= 0 or skew < self.t(ctx, "SKEW_SHARE") * mpi:
            return None
        io = fig.app_io_time
        share = skew / io if io > 0 else 0.0
        skewed = set(lay.index[skew_f > 0].astype(int))
        causes = []
        serial = [f for f in serialised_files(job, ctx) if f["id"] in skewed]
        if serial:
            causes.append("X03")
        single = [f for f in single_aggregator_files(job, ctx) if f["id"] in skewed]
        if single:
            causes.append("X05")
        coll = int((lay["m_coll_reads"] + lay["m_coll_writes"]).sum())
        ops = int((lay["m_reads"] + lay["m_writes"]).sum())
        top = lay.assign(skew=skew_f).sort_values("skew", ascending=False).head(5)
        evidence = {
            "mpiio_s": round(mpi, 3),
            "posix_s": round(posix, 3),
            "skew_s": round(skew, 3),
            "ratio": round(mpi / posix, 2) if posix > 0 else None,
            "mpiio_read_s": round(float(lay["m_read_time"].sum()), 3),
            "mpiio_write_s": round(float(lay["m_write_time"].sum()), 3),
            "posix_read_s": round(float(lay["p_read_time"].sum()), 3),
            "posix_write_s": round(float(lay["p_write_time"].sum()), 3),
            "mpiio_meta_s": round(float(lay["m_meta_time"].sum()), 3),
            "posix_meta_s": round(float(lay["p_meta_time"].sum()), 3),
            "collective_ops": coll,
            "mpiio_ops": ops,
            "io_time_s": round(io, 3),
            "share_of_io_time": round(share, 4),
            "files": [
                {
                    "path": name_of(job, rid),
                    "mpiio_s": round(float(r["m_read_time"] + r["m_write_time"]), 3),
                    "posix_s": round(float(r["p_read_time"] + r["p_write_time"]), 3),
                    "collective_ops": int(r["m_coll_reads"] + r["m_coll_writes"]),
                    "mpiio_ops": int(r["m_reads"] + r["m_writes"]),
                }
                for rid, r in top[top["skew"] > 0].iterrows()
            ],
        }
        head = (
            f"MPI-IO calls took {mpi:,.1f} s over {posix:,.1f} s of POSIX I/O beneath them: "
            f"{skew:,.1f} s ({share:.0%} of the job's I/O time) were spent inside MPI-IO "
            "(waiting, exchanging data, locking), not in the file system. "
        )
        if serial:
            why = (
                f"The ranks took turns on {serial[0]['path']} (X03): remove the "
                "serialisation first."
            )
        elif single:
            why = (
                f"One aggregator wrote {single[0]['path']} for all ranks (X05): the others "
                "waited on it; restripe the file."
            )
        elif coll:
            n, exact = node_count(job, ctx)
            nodes = str(n) if n and exact else "<nodes>"
            why = (
                f"{coll:,} of {ops:,} MPI-IO calls are collective: their time includes the "
                "wait for the slowest rank and the two-phase exchange. Balance the work "
                "before the call, make fewer, larger collective calls and use one "
                f'aggregator per node (`MPI_Info_set(info, "cb_nodes", "{nodes}")`).'
            )
        else:
            why = _independent(job, top[top["skew"] > 0], skew, ops)
        return self.finding(
            job,
            evidence,
            head + why,
            severity=self.severity_for(ctx, share, seconds=skew),
            # the waiting shows as slow ranks on shared files in Drishti's P19
            explains=["DP19"],
            explained_by=causes or None,
        )


def _independent(job: DarshanJob, files: pd.DataFrame, skew: float, ops: int) -> str:
    """Why independent MPI-IO calls outlast their POSIX calls, from what the log shows:
    the file system (ROMIO locks every NFS access), extra POSIX bytes (data sieving), or
    else ROMIO's own per-call cost."""
    fs = {fs_type(job, name_of(job, rid)) for rid in files.index}
    if "nfs" in fs:
        return (
            "The files are on NFS, where ROMIO's NFS driver wraps every read and write in an "
            "fcntl lock (ad_nfs, ADIOI_NFS_WriteContig): put shared files on the parallel "
            "file system, or write one file per rank (`MPI_File_open(MPI_COMM_SELF, ...)`)."
        )
    posix = files["p_bytes_read"] + files["p_bytes_written"]
    if bool((posix > files["m_bytes_read"] + files["m_bytes_written"]).any()):
        return (
            "POSIX moved more bytes than MPI-IO was asked for: data sieving reads and "
            "rewrites blocks under a file lock; turn it off for writes "
            '(`MPI_Info_set(info, "romio_ds_write", "disable")`) or write contiguous blocks.'
        )
    per_call = skew / ops * 1e6 if ops else 0.0
    head = (
        f"The {ops:,} calls are independent and POSIX moved the same bytes, so the "
        f"{per_call:,.1f} us per call went to ROMIO itself: "
    )
    if ops and float(posix.sum()) / ops < SMALL_BYTES:
        return head + (
            "batch the small calls into fewer large ones, and keep atomic mode off "
            "(`MPI_File_set_atomicity(fh, 0)`)."
        )
    return head + (
        "with large calls that points at the MPI-IO driver's locking or hints; print them "
        "at open (`export ROMIO_PRINT_HINTS=1`) and keep atomic mode off "
        "(`MPI_File_set_atomicity(fh, 0)`)."
    )
