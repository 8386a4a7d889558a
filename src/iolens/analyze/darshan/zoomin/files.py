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
    r = recs.copy()
    r["shared"] = r["rank"] < 0
    # a shared record's own slowest-rank time; a per-rank record's whole time
    r["rank_time"] = np.where(r["shared"], r["slowest_time"], r["io_time"])
    for col in ("write_start", "read_start"):  # 0 = never happened; keep out of the minimum
        r[col] = r[col].where(r[col] > 0)
    g = r.groupby("id", sort=False)
    out = pd.DataFrame(
        {
            "bytes": g["bytes"].sum(),
            "bytes_read": g["bytes_read"].sum(),
            "bytes_written": g["bytes_written"].sum(),
            "requests": g["requests"].sum(),
            "io_time": g["rank_time"].max(),
            "max_byte": g["max_byte"].max(),
            "shared": g["shared"].any(),
            "nrank": g["rank"].nunique(),
            "write_start": g["write_start"].min(),
            "write_end": g["write_end"].max(),
            "read_start": g["read_start"].min(),
            "read_end": g["read_end"].max(),
        }
    ).reset_index()
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
