"""Per-job OST throughput heatmap data (the K computer, section 6.5, Figures 6.6-6.9).

A parallel write is as slow as its slowest OST; a heatmap of each OST's throughput over
the run shows at a glance whether the job spread its load evenly or left some OSTs (or a
fail-slow one) behind. The bytes come from the job's own Lustre jobstats rows
(`server_samples` kind `ost` with the job id), so neighbours' traffic does not blur it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from iolens.errors import NotFound
from iolens.store.base import Store

#: Bins across the run when the caller does not choose a width.
DEFAULT_BINS = 60


@dataclass
class Heatmap:
    """OST x time matrices of the job's bytes; rows follow `osts`, columns `bins`."""

    job_id: str
    osts: list[str]
    start: datetime  # left edge of the first bin
    bin_s: int
    bins: list[datetime]  # left edge of each column
    read: list[list[int]]  # bytes read from osts[i] during bins[j]
    write: list[list[int]]
    read_total: list[int]  # per OST
    write_total: list[int]
    max_over_mean: float | None  # per-OST total bytes: 1 = evenly spread

    def rates(self) -> list[list[float]]:
        """Read + write bytes/s per cell, what a plot colours."""
        return [
            [(r + w) / self.bin_s for r, w in zip(rr, ww, strict=True)]
            for rr, ww in zip(self.read, self.write, strict=True)
        ]


def ost_heatmap(store: Store, job_id: str, bin_s: int | None = None) -> Heatmap:
    """The job's bytes per OST and time bin; NotFound for an unknown job.

    Without `bin_s`, the run is cut into about 60 bins of whole seconds (at least the
    sampling interval, so no column is empty by construction). A sample's bytes go to the
    bin holding the end of its interval.
    """
    from iolens.store import queries

    job = queries.job(store, job_id)
    span = store.query(
        "SELECT min(ts - to_microseconds(CAST(interval_s * 1e6 AS BIGINT))) AS t0, "
        "max(ts) AS t1, max(interval_s) AS step, count(*) AS n "
        "FROM server_samples WHERE job_id = ? AND kind = 'ost'",
        [job_id],
    ).to_pylist()[0]
    start: datetime | None = job.get("start") or span["t0"]
    stop: datetime | None = job.get("end") or span["t1"]
    if span["n"] == 0 or start is None or stop is None:
        if start is None:
            raise NotFound(f"job {job_id} has no start time and no OST samples")
        return Heatmap(job_id, [], start, int(bin_s or 1), [], [], [], [], [], None)
    start = min(start, span["t0"])
    stop = max(stop, span["t1"])
    seconds = max(1.0, (stop - start).total_seconds())
    if bin_s is None:
        bin_s = max(math.ceil(seconds / DEFAULT_BINS), math.ceil(span["step"] or 1))
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    n_bins = max(1, math.ceil(seconds / bin_s))
    rows = store.query(
        """
        SELECT component_id,
               (epoch_us(ts) - 1 - epoch_us(?)) // ? AS bin,
               sum(coalesce(read_bytes, 0)) AS r, sum(coalesce(write_bytes, 0)) AS w
        FROM server_samples WHERE job_id = ? AND kind = 'ost'
        GROUP BY ALL
        """,
        [start, int(bin_s) * 1_000_000, job_id],
    ).to_pylist()
    osts = sorted({r["component_id"] for r in rows})
    row_of = {o: i for i, o in enumerate(osts)}
    read = np.zeros((len(osts), n_bins), np.int64)
    write = np.zeros((len(osts), n_bins), np.int64)
    for r in rows:
        j = min(max(int(r["bin"]), 0), n_bins - 1)
        read[row_of[r["component_id"]], j] += int(r["r"])
        write[row_of[r["component_id"]], j] += int(r["w"])
    totals = (read + write).sum(axis=1)
    mean = float(totals.mean()) if len(totals) else 0.0
    return Heatmap(
        job_id=job_id,
        osts=osts,
        start=start,
        bin_s=int(bin_s),
        bins=[start + timedelta(seconds=i * bin_s) for i in range(n_bins)],
        read=read.tolist(),
        write=write.tolist(),
        read_total=read.sum(axis=1).tolist(),
        write_total=write.sum(axis=1).tolist(),
        max_over_mean=float(totals.max()) / mean if mean else None,
    )
