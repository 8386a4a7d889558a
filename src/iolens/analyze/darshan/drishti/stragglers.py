"""DP18, DP19 (Drishti P18, P19): stragglers on files shared by all ranks.

Darshan's shared records keep the fastest and the slowest rank with their bytes and
seconds; Drishti flags a file when they differ by more than 15 % of the file's total.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    col,
    share_severity,
    stripe_clause,
    top_files,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


def straggler_files(
    df: pd.DataFrame,
    total_cols: tuple[str, ...],
    slowest: str,
    fastest: str,
    keep: list[str],
    total_name: str,
) -> pd.DataFrame | None:
    """Drishti's one straggler test for P18 (bytes) and P19 (seconds): per file id, the
    shared records whose `slowest` and `fastest` rank differ by more than
    imbalance_stragglers of the summed `total_cols`, with their `keep` columns, the total
    (as `total_name`) and the imbalance; None without any."""
    df = df[df["rank"] == -1]
    if not len(df):
        return None
    tot = col(df, total_cols[0])
    for name in total_cols[1:]:
        tot = tot + col(df, name)
    diff = (col(df, slowest) - col(df, fastest)).abs()
    imb = diff / tot.where(tot > 0)
    hit = df[imb > T.IMBALANCE_STRAGGLERS]
    if not len(hit):
        return None
    files = hit.set_index("id")[keep].copy()
    files[total_name] = tot[hit.index].to_numpy()
    files["imbalance"] = np.round(imb[hit.index].to_numpy(), 4)
    return files


class _Stragglers(DrishtiRule):
    """DP18 and DP19 differ only in the counters they test, the advice's words and the gain."""

    target = "user"
    drishti_level = "HIGH"
    what: ClassVar[str]  # "data" or "time": what differs between the ranks
    balance: ClassVar[str]  # the advice before the striping one

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        files = self.files(job)
        if files is None:
            return None
        worst = files["imbalance"].idxmax()
        worst_share = float(files["imbalance"].max())
        return self.finding(
            job,
            {
                "files_affected": len(files),
                "files": top_files(job, files, "imbalance"),
                "ranks": [-1],
            },
            f"{len(files)} shared file(s) with {self.what} imbalance up to {worst_share:.0%} "
            f"between the slowest and fastest rank. {self.balance}"
            f"{stripe_clause(job, ctx, worst, 'spread the file over more OSTs')}.",
            severity=share_severity(worst_share),
            gain=self.gain(files.loc[worst], max(job.nprocs, 1)),
        )

    def files(self, job: DarshanJob) -> pd.DataFrame | None:
        """The shared files with stragglers (see `straggler_files`), or None."""
        raise NotImplementedError

    def gain(self, top: pd.Series, nprocs: int) -> dict[str, Any] | None:
        """The gain of balancing the worst file, whose row is `top`."""
        raise NotImplementedError


class SharedDataImbalance(_Stragglers):
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
    drishti_code = "P18"
    what = "data"
    balance = "Balance the decomposition across ranks"

    def files(self, job: DarshanJob) -> pd.DataFrame | None:
        return straggler_files(
            job.counters("POSIX"),
            ("POSIX_BYTES_WRITTEN", "POSIX_BYTES_READ"),
            "POSIX_SLOWEST_RANK_BYTES",
            "POSIX_FASTEST_RANK_BYTES",
            keep=[
                "POSIX_SLOWEST_RANK",
                "POSIX_SLOWEST_RANK_BYTES",
                "POSIX_FASTEST_RANK",
                "POSIX_FASTEST_RANK_BYTES",
            ],
            total_name="bytes",
        )

    def gain(self, top: pd.Series, nprocs: int) -> dict[str, Any] | None:
        mean = top["bytes"] / nprocs
        slowest = top["POSIX_SLOWEST_RANK_BYTES"]
        if not (mean > 0 and slowest > mean):
            return None
        return {
            "metric": "slowest_rank_bytes",
            "factor": round(float(slowest) / mean, 2),
            "basis": "slowest rank's bytes vs. the mean rank's on the worst file",
        }


class SharedTimeImbalance(_Stragglers):
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
    drishti_code = "P19"
    what = "time"
    balance = "Balance the work per rank"

    def files(self, job: DarshanJob) -> pd.DataFrame | None:
        files = straggler_files(
            job.fcounters("POSIX"),
            ("POSIX_F_WRITE_TIME", "POSIX_F_READ_TIME", "POSIX_F_META_TIME"),
            "POSIX_F_SLOWEST_RANK_TIME",
            "POSIX_F_FASTEST_RANK_TIME",
            keep=["POSIX_F_SLOWEST_RANK_TIME", "POSIX_F_FASTEST_RANK_TIME"],
            total_name="seconds",
        )
        if files is None:
            return None
        c = job.counters("POSIX").set_index("id")
        c = c[c["rank"] == -1]
        for k in ("POSIX_SLOWEST_RANK", "POSIX_FASTEST_RANK"):
            files[k] = c[k].reindex(files.index).fillna(-1).astype("int64")
        return files

    def gain(self, top: pd.Series, nprocs: int) -> dict[str, Any] | None:
        mean = top["seconds"] / nprocs
        slowest = top["POSIX_F_SLOWEST_RANK_TIME"]
        if not (mean > 0 and slowest > mean):
            return None
        return {
            "metric": "slowest_rank_seconds",
            "factor": round(float(slowest) / mean, 2),
            "seconds": round(float(slowest) - mean, 3),
            "basis": "slowest rank's I/O time vs. the mean rank's on the worst file",
        }
