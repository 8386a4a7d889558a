"""Per-file statistics: what the zoom-in paper extracts for the covering set's files.

One row per file (record id) of the data modules: its size, how many ranks touched it, its
Lustre layout, the bytes and requests it carried, its I/O time and bandwidth, and when it
was first written and read (read-after-write is what makes read caching pay, root cause 9).

A file's I/O time is Darshan's "by slowest" estimate applied to that one file: the slowest
rank's read + write + metadata time (`F_SLOWEST_RANK_TIME` of a shared record, else the
largest per-rank time), because the ranks work on it concurrently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from iolens.analyze.darshan import groups
from iolens.analyze.darshan.zoomin.records import data_records
from iolens.model.darshan import DarshanJob

FILE_COLUMNS = (
    "id",
    "path",
    "size",
    "ranks",
    "shared",
    "bytes",
    "bytes_read",
    "bytes_written",
    "requests",
    "io_time",
    "bandwidth",
    "stripe_size",
    "stripe_count",
    "osts",
    "write_start",
    "write_end",
    "read_start",
    "read_end",
)


def layouts(job: DarshanJob) -> pd.DataFrame:
    """One Lustre layout per file id (a file's layout is the same in every rank's record)."""
    if job.lustre is None or not len(job.lustre):
        return pd.DataFrame(columns=["id", "stripe_size", "stripe_count", "osts"])
    lay = job.lustre.drop_duplicates("id")[["id", "stripe_size", "stripe_count", "osts"]].copy()
    lay["id"] = lay["id"].astype(np.uint64)
    return lay.reset_index(drop=True)


def file_stats(job: DarshanJob, recs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The per-file table (columns `FILE_COLUMNS`), busiest file first."""
    recs = data_records(job) if recs is None else recs
    if not len(recs):
        return pd.DataFrame(columns=list(FILE_COLUMNS))
    # per file in order of first appearance, in numpy (`groups`: a groupby per figure cost
    # more than the rest of this table)
    ids = recs["id"].to_numpy()
    code, order, at = groups.by_first_seen(ids)
    in_order = bool((order == np.arange(len(order))).all())
    rank = recs["rank"].to_numpy()
    shared = rank < 0

    def col(name: str) -> np.ndarray:
        return recs[name].to_numpy()[order]

    def total(name: str) -> np.ndarray:
        return groups.sums(col(name), at, compensated=not in_order)

    def earliest(name: str) -> np.ndarray:  # 0 = never happened; kept out of the minimum
        x = col(name).astype(float)
        return groups.minima(np.where(x > 0, x, np.nan), at)

    # a shared record's own slowest-rank time; a per-rank record's whole time
    rank_time = np.where(shared, recs["slowest_time"], recs["io_time"])[order]
    out = pd.DataFrame(
        {
            "id": ids[order][at],
            "bytes": total("bytes"),
            "bytes_read": total("bytes_read"),
            "bytes_written": total("bytes_written"),
            "requests": total("requests"),
            "io_time": groups.maxima(rank_time, at),
            "max_byte": groups.maxima(col("max_byte"), at),
            "shared": np.logical_or.reduceat(shared[order], at),
            "nrank": groups.distinct(rank, code, len(at)),
            "write_start": earliest("write_start"),
            "write_end": groups.maxima(col("write_end"), at),
            "read_start": earliest("read_start"),
            "read_end": groups.maxima(col("read_end"), at),
        }
    )
    out["id"] = out["id"].astype(np.uint64)
    out[["write_start", "read_start"]] = out[["write_start", "read_start"]].fillna(0.0)
    out["ranks"] = np.where(out["shared"], max(job.nprocs, 1), out["nrank"]).astype(np.int64)
    out["size"] = np.where(out["max_byte"] > 0, out["max_byte"] + 1, 0).astype(np.int64)
    t = out["io_time"].to_numpy(dtype=float)
    b = out["bytes"].to_numpy(dtype=float)
    out["bandwidth"] = np.divide(b, t, out=np.full(len(t), np.nan), where=t > 0)
    out["path"] = [job.names.get(int(i), "") for i in out["id"]]
    lay = layouts(job)
    out = out.merge(lay, on="id", how="left")
    out["osts"] = [list(o) if isinstance(o, list | tuple | np.ndarray) else [] for o in out["osts"]]
    out["stripe_count"] = out["stripe_count"].astype("Int64")
    out["stripe_size"] = out["stripe_size"].astype("Int64")
    out = out.sort_values(["bytes", "io_time"], ascending=False, kind="stable")
    return out[list(FILE_COLUMNS)].reset_index(drop=True)
