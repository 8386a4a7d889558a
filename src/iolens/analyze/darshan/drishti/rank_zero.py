"""DD01 (DXT Explorer D01, shown by Drishti with `--json`): rank 0 carries the I/O.

DXT Explorer (hpc-io/dxt-explorer, `explorer/insights.py`) flags rank 0 when no other
rank moves more bytes or issues more requests, on DXT traces only, so a perfectly balanced
job is flagged too. iolens works on the counters (every log has them), requires rank 0 to
exceed every other rank strictly and the others' mean by RANK_ZERO_FACTOR, and ignores
the <STDIN>/<STDOUT>/<STDERR> streams.
"""

from __future__ import annotations

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    human,
    per_rank,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class RankZeroHeavy(DrishtiRule):
    """Rank 0 does most of the job's I/O.

    Symptom: rank 0 moves more bytes and issues more requests than any other rank, at
    least twice the other ranks' mean and at least 1 MiB (counters over POSIX and STDIO
    data files; on a file shared by all ranks, the slowest and fastest rank get the bytes
    Darshan recorded for them and the others share the rest).
    Why it hurts: the job's I/O runs at one process's bandwidth while the other ranks
    wait, typically in a gather-to-rank-0-and-write or read-and-broadcast pattern.
    What to do: let every rank write its part through MPI-IO collectives (or HDF5/PnetCDF
    over MPI-IO) instead of funnelling the data through rank 0.
    """

    code = "DD01"
    name = "rank-zero-heavy"
    target = "developer"
    drishti_code = "D01"
    drishti_level = "HIGH"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if job.nprocs < 2:
            return None
        w = per_rank(job)
        zero, others = w.loc[0], w.drop(index=0)
        if zero["bytes"] < T.BUSIEST_RANK_MIN_BYTES:
            return None
        if (others["bytes"] >= zero["bytes"]).any() or (others["ops"] >= zero["ops"]).any():
            return None
        mean_b = float(others["bytes"].mean())
        if zero["bytes"] < T.RANK_ZERO_FACTOR * mean_b:
            return None
        share = float(zero["bytes"] / w["bytes"].sum())
        return self.finding(
            job,
            {
                "rank0_bytes": int(zero["bytes"]),
                "rank0_requests": int(zero["ops"]),
                "rank0_seconds": round(float(zero["time"]), 3),
                "others_mean_bytes": int(mean_b),
                "others_max_bytes": int(others["bytes"].max()),
                "rank0_share": round(share, 4),
                "ranks": [0],
            },
            f"Rank 0 moves {share:.0%} of the job's bytes ({human(zero['bytes'])}). Let all "
            "ranks write their own parts with MPI-IO collectives "
            "(`MPI_File_write_at_all(fh, rank * n, buf, n, MPI_BYTE, &st)`) rather than "
            "gathering to rank 0, or read once per node and broadcast.",
            severity="critical" if share >= T.CRITICAL_SHARE else "warning",
            gain=(
                {
                    "metric": "rank0_bytes",
                    "factor": round(float(zero["bytes"]) / (float(w["bytes"].mean())), 1),
                    "basis": "rank 0's bytes vs. a balanced share of the job's bytes",
                }
                if w["bytes"].mean() > 0
                else None
            ),
        )
