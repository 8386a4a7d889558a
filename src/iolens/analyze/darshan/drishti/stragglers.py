"""DP18, DP19 (Drishti P18, P19): stragglers on files shared by all ranks.

Darshan's shared records keep the fastest and the slowest rank with their bytes and
seconds; Drishti flags a file when they differ by more than 15 % of the file's total.
"""

from __future__ import annotations

import numpy as np

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    col,
    setstripe,
    share_severity,
    top_files,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.analyze.findings.base import Finding
from iolens.model.darshan import DarshanJob


class SharedDataImbalance(DrishtiRule):
    """Ranks move very different amounts of data on a shared file.

    Symptom: on a file every rank opened, the slowest rank's bytes and the fastest
    rank's bytes differ by more than 15 % of the file's bytes (Drishti's
    imbalance_stragglers).
    Why it hurts: a collective phase ends when its slowest rank does; the rank carrying
    more data makes every other rank wait.
    What to do: balance the data decomposition; stripe the file so the heavy ranks'
    ranges spread over more OSTs.
    """

    code = "DP18"
    name = "shared-data-imbalance"
    target = "user"
    drishti_code = "P18"
    drishti_level = "HIGH"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        c = job.counters("POSIX")
        c = c[c["rank"] == -1]
        if not len(c):
            return None
        tot = col(c, "POSIX_BYTES_WRITTEN") + col(c, "POSIX_BYTES_READ")
        diff = (col(c, "POSIX_SLOWEST_RANK_BYTES") - col(c, "POSIX_FASTEST_RANK_BYTES")).abs()
        imb = diff / tot.where(tot > 0)
        hit = c[imb > T.IMBALANCE_STRAGGLERS]
        if not len(hit):
            return None
        files = hit.set_index("id")[
            [
                "POSIX_SLOWEST_RANK",
                "POSIX_SLOWEST_RANK_BYTES",
                "POSIX_FASTEST_RANK",
                "POSIX_FASTEST_RANK_BYTES",
            ]
        ].copy()
        files["bytes"] = tot[hit.index].to_numpy()
        files["imbalance"] = np.round(imb[hit.index].to_numpy(), 4)
        worst = files["imbalance"].idxmax()
        top = files.loc[worst]
        mean = top["bytes"] / max(job.nprocs, 1)
        worst_share = float(files["imbalance"].max())
        return self.finding(
            job,
            {
                "files_affected": len(files),
                "files": top_files(job, files, "imbalance"),
                "ranks": [-1],
            },
            f"{len(files)} shared file(s) with data imbalance up to {worst_share:.0%} between "
            "the slowest and fastest rank. Balance the decomposition across ranks; spread "
            f"the file over more OSTs: `{setstripe(job, ctx, worst)}`.",
            severity=share_severity(worst_share),
            gain=(
                {
                    "metric": "slowest_rank_bytes",
                    "factor": round(float(top["POSIX_SLOWEST_RANK_BYTES"]) / mean, 2),
                    "basis": "slowest rank's bytes vs. the mean rank's on the worst file",
                }
                if mean > 0 and top["POSIX_SLOWEST_RANK_BYTES"] > mean
                else None
            ),
        )


class SharedTimeImbalance(DrishtiRule):
    """Ranks spend very different times on a shared file.

    Symptom: on a file every rank opened, the slowest and the fastest rank's I/O times
    differ by more than 15 % of the file's total I/O time (read + write + metadata
    seconds, Drishti's imbalance_stragglers).
    Why it hurts: the job waits for the slowest rank; stragglers often sit behind a
    busy OST or contend for the same stripes.
    What to do: balance the work; stripe the file over more OSTs so no rank's range
    lands on one busy server.
    """

    code = "DP19"
    name = "shared-time-imbalance"
    target = "user"
    drishti_code = "P19"
    drishti_level = "HIGH"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        f = job.fcounters("POSIX")
        f = f[f["rank"] == -1]
        if not len(f):
            return None
        tot = (
            col(f, "POSIX_F_WRITE_TIME") + col(f, "POSIX_F_READ_TIME") + col(f, "POSIX_F_META_TIME")
        )
        diff = (col(f, "POSIX_F_SLOWEST_RANK_TIME") - col(f, "POSIX_F_FASTEST_RANK_TIME")).abs()
        imb = diff / tot.where(tot > 0)
        hit = f[imb > T.IMBALANCE_STRAGGLERS]
        if not len(hit):
            return None
        files = hit.set_index("id")[
            ["POSIX_F_SLOWEST_RANK_TIME", "POSIX_F_FASTEST_RANK_TIME"]
        ].copy()
        files["seconds"] = tot[hit.index].to_numpy()
        files["imbalance"] = np.round(imb[hit.index].to_numpy(), 4)
        c = job.counters("POSIX").set_index("id")
        c = c[c["rank"] == -1]
        for k in ("POSIX_SLOWEST_RANK", "POSIX_FASTEST_RANK"):
            files[k] = c[k].reindex(files.index).fillna(-1).astype("int64")
        worst = files["imbalance"].idxmax()
        top = files.loc[worst]
        mean = top["seconds"] / max(job.nprocs, 1)
        worst_share = float(files["imbalance"].max())
        return self.finding(
            job,
            {
                "files_affected": len(files),
                "files": top_files(job, files, "imbalance"),
                "ranks": [-1],
            },
            f"{len(files)} shared file(s) with time imbalance up to {worst_share:.0%} between "
            "the slowest and fastest rank. Balance the work per rank; spread the file over "
            f"more OSTs: `{setstripe(job, ctx, worst)}`.",
            severity=share_severity(worst_share),
            gain=(
                {
                    "metric": "slowest_rank_seconds",
                    "factor": round(float(top["POSIX_F_SLOWEST_RANK_TIME"]) / mean, 2),
                    "seconds": round(float(top["POSIX_F_SLOWEST_RANK_TIME"]) - mean, 3),
                    "basis": "slowest rank's I/O time vs. the mean rank's on the worst file",
                }
                if mean > 0 and top["POSIX_F_SLOWEST_RANK_TIME"] > mean
                else None
            ),
        )
