"""X01: reads the application did not need: zero-byte reads and read-modify-write reads.

Darshan counts a read that returns 0 bytes (at or past the end of the file) in the
POSIX_SIZE_READ_0_100 bin and nowhere else: its common-access table skips size 0. So the
counters give a lower bound per record: the reads of that bin that the bytes read cannot
account for, the other bins' reads being at least as large as their lower edges. DXT, where
it traced the file, counts them exactly. Reads ROMIO issues itself to read-modify-write a
block (data sieving, two-phase I/O with holes) show as POSIX reads on a file whose MPI-IO
record has writes and no reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iolens.analyze.darshan.drishti.common import col
from iolens.analyze.darshan.expert.common import ExpertRule, figures, name_of
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: Darshan's read-size bins above 0-100 bytes and the smallest size each can hold
BIN_FLOOR = {
    "100_1K": 101,
    "1K_10K": 1025,
    "10K_100K": 10241,
    "100K_1M": 102401,
    "1M_4M": 1048577,
    "4M_10M": 4194305,
    "10M_100M": 10485761,
    "100M_1G": 104857601,
    "1G_PLUS": 1073741825,
}


def zero_reads_counters(job: DarshanJob) -> pd.DataFrame:
    """Per file id: `zero` (a lower bound on reads that returned 0 bytes, from the size
    bins) and `seconds` (their share of the records' read time)."""
    c, f = job.counters("POSIX"), job.fcounters("POSIX")
    if not len(c):
        return pd.DataFrame(columns=["zero", "seconds"], dtype=float)
    floor = sum(col(c, f"POSIX_SIZE_READ_{b}").clip(lower=0) * v for b, v in BIN_FLOOR.items())
    room = (col(c, "POSIX_BYTES_READ").clip(lower=0) - floor).clip(lower=0)
    zero = (col(c, "POSIX_SIZE_READ_0_100").clip(lower=0) - room).clip(lower=0)
    reads = col(c, "POSIX_READS").clip(lower=0)
    rt = col(f, "POSIX_F_READ_TIME").clip(lower=0).to_numpy()
    seconds = np.where(reads > 0, rt * zero / reads.where(reads > 0, 1), 0.0)
    frame = pd.DataFrame({"id": c["id"].to_numpy(np.uint64), "zero": zero, "seconds": seconds})
    return frame.groupby("id")[["zero", "seconds"]].sum()


def zero_reads_dxt(job: DarshanJob) -> pd.DataFrame:
    """Per file id: reads of 0 bytes DXT traced (`zero`) and their duration (`seconds`;
    a merged run's span, an upper bound when it holds several reads)."""
    z = _zero_dxt(job)
    if z is None:
        return pd.DataFrame(columns=["zero", "seconds"], dtype=float)
    frame = pd.DataFrame(
        {
            "id": z["id"].to_numpy(np.uint64),
            "zero": _reads(z),
            "seconds": (z["end"] - z["start"]).clip(lower=0).to_numpy(float),
        }
    )
    return frame.groupby("id")[["zero", "seconds"]].sum()


def _zero_dxt(job: DarshanJob) -> pd.DataFrame | None:
    """The DXT runs of POSIX reads that returned 0 bytes (None without DXT)."""
    d = job.dxt
    if d is None or not len(d):
        return None
    return d[(d["module"] == "DXT_POSIX") & (d["op"] == "read") & (d["length"] == 0)]


def _reads(runs: pd.DataFrame) -> np.ndarray:
    """Reads per DXT row: a merged run holds `count` of them."""
    if "count" in runs:
        return runs["count"].to_numpy(np.int64)
    return np.ones(len(runs), np.int64)


def unrequested_reads(job: DarshanJob, ctx: RuleContext) -> pd.DataFrame:
    """Per file id with any: `zero` (zero-byte reads, the larger of the DXT count and the
    counters' bound), `rmw` (POSIX reads under an MPI-IO record that only writes),
    `rmw_bytes`, `reads` (their union) and `seconds` (their time)."""
    cnt, dxt = zero_reads_counters(job), zero_reads_dxt(job)
    ids = cnt.index.union(dxt.index)
    cnt = cnt.reindex(ids, fill_value=0)
    dxt = dxt.reindex(ids, fill_value=0)
    from_dxt = dxt["zero"] >= cnt["zero"]
    out = pd.DataFrame(
        {
            "zero": np.where(from_dxt, dxt["zero"], cnt["zero"]),
            "seconds": np.where(from_dxt, dxt["seconds"], cnt["seconds"]),
            "from_dxt": from_dxt & (dxt["zero"] > 0),
        },
        index=ids,
    )
    lay = figures(job, ctx).layers
    if len(lay):
        rmw = lay[(lay["m_reads"] == 0) & (lay["m_writes"] > 0) & (lay["p_reads"] > 0)]
        out = out.join(
            pd.DataFrame(
                {
                    "rmw": rmw["p_reads"],
                    "rmw_bytes": rmw["p_bytes_read"],
                    "rmw_seconds": rmw["p_read_time"],
                }
            ),
            how="outer",
        )
    for k in ("zero", "seconds", "rmw", "rmw_bytes", "rmw_seconds"):
        if k not in out:
            out[k] = 0
    out = out.fillna({"zero": 0, "seconds": 0.0, "rmw": 0, "rmw_bytes": 0, "rmw_seconds": 0.0})
    out["from_dxt"] = out["from_dxt"].fillna(False).astype(bool)
    rmw_file = out["rmw"] > 0
    # RMW reads are every POSIX read of such a file, zero-byte ones included
    out["reads"] = np.where(rmw_file, np.maximum(out["rmw"], out["zero"]), out["zero"])
    out["seconds"] = np.where(rmw_file, out["rmw_seconds"], out["seconds"])
    return out[out["reads"] > 0].drop(columns="rmw_seconds")


class UnrequestedReads(ExpertRule):
    """Many reads that return nothing or that ROMIO adds to read-modify-write blocks.

    Symptom: more than 1,000 reads (Drishti's small_requests_absolute) that either
    returned 0 bytes (reads at or past the end of the file: Darshan's 0-100 byte bin beyond
    what the bytes read account for, or 0-length DXT segments) or were issued by POSIX on a
    file the application only wrote through MPI-IO (ROMIO reading a block before writing
    part of it), making more than 10 % of the job's reads or of its I/O time (Drishti's
    small_requests share).
    Why it hurts: each is a full system call and, for read-modify-write, a locked round
    trip to the file system per data-sieving block (ROMIO takes a write lock around the
    read and the write), so they cost time while moving no data the application wanted;
    hundreds of thousands of them can take hours of I/O time.
    What to do: do not read past the end of a file (check the size with `fstat`, stop on a
    short read); for read-modify-write under MPI-IO, write collectively
    (`MPI_File_write_all`) or with contiguous file views, or turn data sieving off for
    writes (`romio_ds_write=disable`).
    """

    code = "X01"
    name = "unrequested-reads"
    severity = "warning"
    thresholds = ("ZERO_READS_MIN", "ZERO_READS_SHARE")
    basis = "time"
    target = "developer"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        c = job.counters("POSIX")
        reads = int(col(c, "POSIX_READS").clip(lower=0).sum())
        # at most: every read of the 0-100 byte bin, every 0-byte DXT read, and (under
        # MPI-IO) every POSIX read; too few of those, and the per-file work is skipped
        z = _zero_dxt(job)
        bound = col(c, "POSIX_SIZE_READ_0_100").clip(lower=0).sum()
        bound += int(_reads(z).sum()) if z is not None else 0
        if bound + (reads if job.has("MPI-IO") else 0) <= self.t(ctx, "ZERO_READS_MIN"):
            return None
        files = unrequested_reads(job, ctx)
        if not len(files):
            return None
        n = int(files["reads"].sum())
        if n <= self.t(ctx, "ZERO_READS_MIN"):
            return None
        seconds = float(files["seconds"].sum())
        io = figures(job, ctx).app_io_time
        read_share = n / reads if reads else 0.0
        time_share = seconds / io if io > 0 else 0.0
        bar = self.t(ctx, "ZERO_READS_SHARE")
        if max(read_share, time_share) <= bar:
            return None
        zero, rmw = int(files["zero"].sum()), int(files["rmw"].sum())
        top = files.sort_values(["seconds", "reads"], ascending=False).head(5)
        evidence: dict[str, Any] = {
            "unrequested_reads": n,
            "zero_byte_reads": zero,
            "zero_byte_source": "dxt" if bool(files["from_dxt"].any()) else "counters",
            "rmw_reads": rmw,
            "rmw_read_bytes": int(files["rmw_bytes"].sum()),
            "posix_reads": reads,
            "share_of_reads": round(read_share, 4),
            "seconds": round(seconds, 3),
            "io_time_s": round(io, 3),
            "share_of_io_time": round(time_share, 4),
            "files": [
                {
                    "path": name_of(job, rid),
                    "zero_byte_reads": int(r["zero"]),
                    "rmw_reads": int(r["rmw"]),
                    "seconds": round(float(r["seconds"]), 3),
                }
                for rid, r in top.iterrows()
            ],
        }
        parts = []
        if zero:
            parts.append(
                f"{zero:,} reads returned 0 bytes (at or past the end of the file): stop on "
                "a short read or read the size first (`fstat(fd, &st)`) instead of reading "
                "until read() returns 0"
            )
        if rmw:
            parts.append(
                f"{rmw:,} POSIX reads hit files the job only wrote through MPI-IO, i.e. "
                "ROMIO read-modify-write: write collectively (`MPI_File_write_all`) or turn "
                'data sieving off for writes (`MPI_Info_set(info, "romio_ds_write", '
                '"disable")`)'
            )
        rec = (
            f"{n:,} reads ({read_share:.0%} of the job's reads) moved no data the "
            f"application asked for and took {seconds:,.1f} s ({time_share:.0%} of its I/O "
            "time). " + "; ".join(parts) + "."
        )
        return self.finding(
            job,
            evidence,
            rec,
            severity=self.severity_for(ctx, time_share, seconds=seconds),
            # zero-byte reads sit in Drishti's small-read bin; RMW reads are the read half
            # of the POSIX bytes beyond MPI-IO's (X02)
            explains=["DP05"] if zero else None,
            explained_by=["X02"] if rmw else None,
        )
