"""Z04: unbalanced I/O workload among ranks (zoom-in root cause 4)."""

from __future__ import annotations

import numpy as np

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import gain, mb
from iolens.analyze.darshan.zoomin.analysis import ZoomIn, zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


def _rank_files(z: ZoomIn, rank: int, n: int = 5) -> list[dict[str, object]]:
    """The heavy rank's biggest files: its own records and shared ones it was slowest on."""
    r = z.records
    mine = r[(r["rank"] == rank) | ((r["rank"] < 0) & (r["slowest_rank"] == rank))]
    mine = mine.assign(rank_bytes=np.where(mine["rank"] < 0, mine["slowest_bytes"], mine["bytes"]))
    top = mine.sort_values("rank_bytes", ascending=False).head(n)
    return [
        {
            "path": z.job.names.get(int(i), ""),
            "bytes": int(b),
            "requests": int(q),
            "shared": bool(k < 0),
        }
        for i, b, q, k in zip(
            top["id"], top["rank_bytes"], top["requests"], top["rank"], strict=True
        )
    ]


class RankImbalance(DarshanRule):
    """One rank does most of the job's I/O.

    Symptom: the busiest rank moves half or more of the bytes or requests (MaxRankIO, the
    paper's Equation 1) and at least 1.5 times the mean rank's.
    Why it hurts: the job's I/O lasts as long as its busiest rank's while the others wait;
    Climate1's jobs (MaxRankIO 77-78 %) and Combustion1's rank-0 reads stayed under
    1 GB/s for that reason (Figures 9, 16).
    What to do: spread the work: collective MPI-IO lets aggregators on several nodes share
    it, or each rank writes its own part instead of gathering on rank 0.
    """

    code = "Z04"
    name = "rank-imbalance"
    target = "developer"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        f = z.factors
        n = len(z.ranks.bytes)
        if not z.material or n < 2:
            return None
        share_max, imb = z.t("MAX_RANK_SHARE"), z.t("RANK_IMBALANCE")
        by = None
        for key, vec in (("bytes", z.ranks.bytes), ("requests", z.ranks.requests)):
            share = f["max_rank_io" if key == "bytes" else "max_rank_req"]
            if share is not None and share >= share_max and share * n >= imb:
                by = (key, vec, share)
                break
        if by is None:
            return None
        key, vec, share = by
        rank = int(np.argmax(vec))
        t = z.ranks.time
        evidence = {
            "by": key,
            "rank": rank,
            "share": round(share, 4),
            "max_rank_io": f["max_rank_io"],
            "max_rank_req": f["max_rank_req"],
            "rank_value": float(vec[rank]),
            "mean_value": float(vec.mean()),
            "nprocs": n,
            "rank_io_time_s": round(float(t[rank]), 4),
            "mean_io_time_s": round(float(t.mean()), 4),
            "files": _rank_files(z, rank),
        }
        nodes = int(f["nnodes"]) if f["nnodes"] else 8
        what = mb(vec[rank]) if key == "bytes" else f"{int(vec[rank])} requests"
        rec = (
            f"Rank {rank} does {share:.0%} of the job's I/O {key} ({what}) while the mean rank "
            f"does {vec.mean() / max(vec[rank], 1e-12):.1%} of that. Let every rank write its "
            "part through collective MPI-IO, with aggregators on several nodes: "
            f'`MPI_Info_set(info, "cb_nodes", "{nodes}"); '
            "MPI_File_write_at_all(fh, rank * count, buf, count, MPI_BYTE, &status);`, "
            "instead of gathering the data on one rank."
        )
        g = None
        if t.mean() > 0 and t.max() > t.mean():
            g = gain(
                min(float(t.max() / t.mean()), float(n)),
                "the slowest rank's I/O time brought down to the mean rank's",
            )
        return self.finding(job, evidence, rec, gain=g)
