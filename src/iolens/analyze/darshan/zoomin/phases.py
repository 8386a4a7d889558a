"""I/O phases of a Darshan log: bursts of I/O separated by idle gaps (root cause 1).

The zoom-in paper (Figure 6) tells a slow job from a fast one of the same application by
how many bursty I/O phases each rank takes part in: every phase ends when its slowest
rank does, so many small phases pay that synchronisation many times. A phase here is a
maximal stretch of the job's I/O activity whose pauses are shorter than `gap` seconds.

Activity comes from DXT segments when the log has them (every read and write with its
time), else from the (rank, file) intervals of the counters; without DXT a file that is
open and written throughout the run is one long interval, so phases inside it are not
seen and the count is a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iolens.analyze.darshan.zoomin.covering import Interval, intervals
from iolens.analyze.darshan.zoomin.records import STREAMS, dxt_bytes
from iolens.analyze.darshan.zoomin.thresholds import PHASE_GAP_FRAC, PHASE_GAP_MIN_S
from iolens.model.darshan import DarshanJob


@dataclass(frozen=True)
class IOPhase:
    start: float  # seconds since the job start
    end: float
    bytes: int
    ranks: int  # distinct ranks active in the phase (-1 counts as all)

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def bandwidth(self) -> float | None:
        return self.bytes / self.duration if self.duration > 0 else None


def _activity(job: DarshanJob) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """(start, end, bytes, rank) arrays of the job's I/O activity and where they came from."""
    dxt = job.dxt
    if dxt is not None and len(dxt):
        # MPI-IO segments sit on POSIX ones: use one layer so bytes are not counted twice
        mod = "DXT_POSIX" if (dxt["module"] == "DXT_POSIX").any() else "DXT_MPIIO"
        names = job.names
        d = dxt[dxt["module"] == mod]
        files, row = np.unique(d["id"].to_numpy(np.uint64), return_inverse=True)
        data = np.array([names.get(int(i), "") not in STREAMS for i in files], dtype=bool)
        d = d[data[row.ravel()]] if len(files) else d
        return (
            d["start"].to_numpy(dtype=float),
            d["end"].to_numpy(dtype=float),
            dxt_bytes(d),
            d["rank"].to_numpy(dtype=np.int64),
            "dxt",
        )
    ivs: list[Interval] = intervals(job, source="counters")
    return (
        np.array([i.start for i in ivs], dtype=float),
        np.array([i.end for i in ivs], dtype=float),
        np.array([i.bytes for i in ivs], dtype=np.int64),
        np.array([i.rank for i in ivs], dtype=np.int64),
        "counters",
    )


def gap_for(job: DarshanJob) -> float:
    """The idle time that separates two phases: a fixed floor or a share of the run."""
    return max(PHASE_GAP_MIN_S, PHASE_GAP_FRAC * max(job.run_time, 0.0))


def io_phases(job: DarshanJob, gap: float | None = None) -> tuple[list[IOPhase], str]:
    """The job's I/O phases in time order, and the source they were found in."""
    start, end, nbytes, rank, source = _activity(job)
    if not len(start):
        return [], source
    gap = gap_for(job) if gap is None else gap
    order = np.argsort(start, kind="stable")
    start, end, nbytes, rank = start[order], end[order], nbytes[order], rank[order]
    reach = np.maximum.accumulate(end)  # furthest end of everything started so far
    new = np.empty(len(start), dtype=bool)
    new[0] = True
    new[1:] = start[1:] > reach[:-1] + gap
    first = np.flatnonzero(new)
    ids = np.cumsum(new) - 1
    ends = np.maximum.reduceat(end, first)
    sizes = np.add.reduceat(nbytes, first)
    # distinct ranks per phase: unique (phase, rank) pairs, counted per phase
    pairs = np.unique(ids.astype(np.int64) * (int(rank.max()) + 2) + (rank + 1))
    pair_phase = pairs // (int(rank.max()) + 2)
    nranks = np.bincount(pair_phase, minlength=len(first))
    all_ranks = np.bincount(ids[rank < 0], minlength=len(first)) > 0
    return [
        IOPhase(
            float(start[f]),
            float(e),
            int(b),
            int(job.nprocs if shared else n),
        )
        for f, e, b, n, shared in zip(first, ends, sizes, nranks, all_ranks, strict=True)
    ], source
