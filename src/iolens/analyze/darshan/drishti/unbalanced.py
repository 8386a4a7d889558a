"""DD02 (DXT Explorer D02, shown by Drishti with `--json`): unbalanced workload.

DXT Explorer flags ranks above mean + 1 standard deviation in read count, write count,
bytes and time at once, so a read-only (or write-only) job is never flagged and, in any
noisy but balanced job, some ranks always are. iolens uses requests (reads + writes),
bytes and time, and also requires the ranks' bytes above (1 + imbalance_size) x the mean.
"""

from __future__ import annotations

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import DrishtiRule, per_rank, stripe_clause
from iolens.analyze.darshan.drishti.hdf5 import no_fill
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class UnbalancedWorkload(DrishtiRule):
    """Some ranks do much more I/O than the others.

    Symptom: ranks whose bytes, requests and I/O seconds are all above the mean plus one
    standard deviation, with bytes also above 1.3x the mean, the busiest moving at least
    1 MiB (counters over POSIX and STDIO data files).
    Why it hurts: the job's I/O phases last as long as their busiest ranks; the others
    idle at the next synchronisation.
    What to do: rebalance the data decomposition, or aggregate through MPI-IO collectives
    so aggregators, not the application's ranks, carry the traffic.
    """

    code = "DD02"
    name = "unbalanced-workload"
    target = "developer"
    drishti_code = "D02"
    drishti_level = "HIGH"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        if job.nprocs < 3:  # with two ranks the larger one is exactly mean + 1 std
            return None
        w = per_rank(job)
        mean, std = w.mean(), w.std(ddof=0)
        k = T.UNBALANCED_STD
        hit = w[
            (w["bytes"] > mean["bytes"] + k * std["bytes"])
            & (w["bytes"] > (1 + T.IMBALANCE_SIZE) * mean["bytes"])
            & (w["ops"] > mean["ops"] + k * std["ops"])
            & (w["time"] > mean["time"] + k * std["time"])
        ]
        if not len(hit) or hit["bytes"].max() < T.BUSIEST_RANK_MIN_BYTES:
            return None
        hit = hit.sort_values("bytes", ascending=False)
        factor = float(hit["bytes"].iloc[0] / mean["bytes"])
        return self.finding(
            job,
            {
                "ranks_over": len(hit),
                "ranks": [
                    {
                        "rank": int(r),
                        "bytes": int(row["bytes"]),
                        "requests": int(row["ops"]),
                        "seconds": round(float(row["time"]), 3),
                    }
                    for r, row in hit.head(5).iterrows()
                ],
                "mean": {
                    "bytes": int(mean["bytes"]),
                    "requests": round(float(mean["ops"]), 1),
                    "seconds": round(float(mean["time"]), 3),
                },
            },
            f"{len(hit)} rank(s) do up to {factor:.1f}x the mean rank's I/O. Rebalance the "
            "decomposition or aggregate through MPI-IO collectives"
            f"{stripe_clause(job, ctx, None, 'spread shared files over more OSTs')}; "
            f"{no_fill()}.",
            severity="critical" if factor >= 1 / T.CRITICAL_SHARE else "warning",
            gain={
                "metric": "busiest_rank_bytes",
                "factor": round(factor, 2),
                "basis": "the busiest rank's bytes vs. the mean rank's",
            },
        )
