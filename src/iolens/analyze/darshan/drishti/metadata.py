"""DP17 (Drishti P17): ranks spend long in metadata operations, counted per rank.

Drishti 0.8 counts records whose POSIX_F_META_TIME exceeds 30 s. For a shared record
(rank -1) that counter is the sum over all ranks, so 1,024 ranks spending 0.05 s each are
reported as one rank over 30 s; and a rank with many files of 1 s each is never reported.
iolens adds up each rank's own records and its even share of the shared records.
"""

from __future__ import annotations

import pandas as pd

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import DrishtiRule, per_file, top_files
from iolens.analyze.darshan.drishti.hdf5 import collective_metadata, uses_hdf5
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


def metadata_per_rank(job: DarshanJob) -> pd.Series:
    """POSIX metadata seconds of each rank 0..nprocs-1 (shared records spread evenly)."""
    f = job.fcounters("POSIX")
    n = max(int(job.nprocs), 1)
    out = pd.Series(0.0, index=pd.RangeIndex(n, name="rank"))
    if not len(f) or "POSIX_F_META_TIME" not in f.columns:
        return out
    own = f[f["rank"] >= 0].groupby("rank")["POSIX_F_META_TIME"].sum()
    own = own[own.index < n]
    out.loc[own.index] += own.to_numpy(dtype=float)
    out += float(f.loc[f["rank"] < 0, "POSIX_F_META_TIME"].sum()) / n
    return out


class MetadataTime(DrishtiRule):
    """Ranks spend more than 30 s each in metadata operations.

    Symptom: some rank's POSIX metadata time (open, stat, seek, fsync, close, ...) adds
    up to more than 30 s, Drishti's metadata_time_rank; for files shared by all ranks
    each rank is charged its even share of the shared record.
    Why it hurts: metadata calls serialise on the metadata server; seconds per rank mean
    the MDS is the job's bottleneck and slows every other job on the file system.
    What to do: open fewer files (aggregate small files, open once and keep open), cache
    stat results; with HDF5, make metadata operations collective.
    """

    code = "DP17"
    name = "metadata-time"
    target = "developer"
    drishti_code = "P17"
    drishti_level = "HIGH"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if not job.has("POSIX"):
            return None
        per_rank = metadata_per_rank(job)
        slow = per_rank[per_rank > T.METADATA_TIME_RANK].sort_values(ascending=False)
        if not len(slow):
            return None
        f, c = job.fcounters("POSIX"), job.counters("POSIX")
        files = per_file(f, {"meta_seconds": f["POSIX_F_META_TIME"]})
        files["opens"] = per_file(c, {"o": c["POSIX_OPENS"]})["o"]
        files["stats"] = per_file(c, {"s": c["POSIX_STATS"]})["s"]
        files = files[files["meta_seconds"] > 0]
        worst = float(slow.iloc[0])
        advice = (
            f"{len(slow)} rank(s) spend over {T.METADATA_TIME_RANK:.0f} s in metadata calls "
            f"(worst {worst:.0f} s). Open each file once and keep it open, aggregate small "
            "files into one (or a few) shared files, and cache stat results."
        )
        if uses_hdf5(job):
            advice += " " + collective_metadata()
        share = worst / job.run_time if job.run_time > 0 else 0.0
        return self.finding(
            job,
            {
                "threshold_seconds": T.METADATA_TIME_RANK,
                "ranks_over": len(slow),
                "ranks": [
                    {"rank": int(r), "meta_seconds": round(float(s), 3)}
                    for r, s in slow.head(T.TOP_FILES).items()
                ],
                "files": top_files(job, files, "meta_seconds"),
            },
            advice,
            severity="critical" if share >= T.CRITICAL_SHARE else "warning",
            gain={
                "metric": "metadata_seconds",
                "seconds": round(worst, 3),
                "run_time_share": round(share, 4),
                "basis": "the slowest rank's metadata time, the most it can save",
            },
        )
