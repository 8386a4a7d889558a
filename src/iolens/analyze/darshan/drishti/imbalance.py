"""DP21, DP22 (Drishti P21, P22): ranks write or read very different amounts of a file.

Drishti compares, per file, the non-shared records of the ranks that accessed it:
(max - min) / max of their bytes above 30 % is an imbalance. (Drishti has no P20.)
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.drishti.common import (
    MAX_RANKS,
    DrishtiRule,
    share_severity,
    stripe_clause,
    top_files,
)
from iolens.analyze.darshan.drishti.hdf5 import no_fill
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class _SizeImbalance(DrishtiRule):
    target = "developer"
    drishti_level = "HIGH"
    bytes_col: ClassVar[str]
    verb: ClassVar[str]

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        c = job.counters("POSIX")
        c = c[c["rank"] != -1]
        if not len(c):
            return None
        g = c.groupby("id")[self.bytes_col]
        files = g.agg(["max", "min", "mean", "count"])
        files = files[files["max"] > 0]
        files["imbalance"] = (files["max"] - files["min"]) / files["max"]
        files = files[files["imbalance"] > T.IMBALANCE_SIZE]
        if not len(files):
            return None
        files["imbalance"] = np.round(files["imbalance"], 4)
        files["max_rank"] = c.loc[g.idxmax()[files.index], "rank"].to_numpy()
        files["min_rank"] = c.loc[g.idxmin()[files.index], "rank"].to_numpy()
        files = files.rename(columns={"count": "ranks", "max": "max_bytes", "min": "min_bytes"})
        worst = files["imbalance"].idxmax()
        worst_share = float(files["imbalance"].max())
        top = files.loc[worst]
        ranks = sorted({int(r) for r in files["max_rank"]})[:MAX_RANKS]
        advice = (
            f"{len(files)} file(s) where the ranks' {self.verb} bytes differ by up to "
            f"{worst_share:.0%}. Balance the data between ranks"
            f"{stripe_clause(job, ctx, worst, 'spread the file over more OSTs')}; {no_fill()}; "
            "if only rank 0 opens the "
            "file, have all ranks take part through MPI-IO collectives."
        )
        return self.finding(
            job,
            {
                "files_affected": len(files),
                "files": top_files(job, files.drop(columns=["mean"]), "imbalance"),
                "ranks": ranks,
            },
            advice,
            severity=share_severity(worst_share),
            gain={
                "metric": f"max_rank_bytes_{self.verb}",
                "factor": round(float(top["max_bytes"]) / float(top["mean"]), 2),
                "basis": "the heaviest rank's bytes vs. the mean rank's on the worst file",
            },
        )


class WriteSizeImbalance(_SizeImbalance):
    """Ranks write very different amounts of the same file.

    Symptom: among the ranks with their own record of a file, the largest and smallest
    bytes written differ by more than 30 % of the largest (Drishti's imbalance_size).
    Why it hurts: the ranks writing more finish later and the others wait for them.
    What to do: balance the decomposition; skip fill values (HDF5/netCDF NO_FILL) when
    every element is written anyway.
    """

    code = "DP21"
    name = "write-size-imbalance"
    drishti_code = "P21"
    bytes_col = "POSIX_BYTES_WRITTEN"
    verb = "written"


class ReadSizeImbalance(_SizeImbalance):
    """Ranks read very different amounts of the same file.

    Symptom: among the ranks with their own record of a file, the largest and smallest
    bytes read differ by more than 30 % of the largest (Drishti's imbalance_size).
    Why it hurts: the ranks reading more finish later and the others wait for them.
    What to do: balance the decomposition, or read once and distribute.
    """

    code = "DP22"
    name = "read-size-imbalance"
    drishti_code = "P22"
    bytes_col = "POSIX_BYTES_READ"
    verb = "read"
