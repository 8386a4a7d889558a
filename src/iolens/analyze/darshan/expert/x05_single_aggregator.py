"""X05: a single-stripe shared file accessed collectively gets one aggregator.

ROMIO's Lustre driver sizes collective buffering by the stripe count (MPICH
src/mpi/romio/adio/ad_lustre/ad_lustre_aggregate.c, ADIOI_LUSTRE_Get_striping_info:
avail_cb_nodes = stripe_count * min(cb_nodes / stripe_count, co_ratio), with the hint
romio_lustre_co_ratio defaulting to 1 in ad_lustre_hints.c; ADIOI_LUSTRE_Calc_aggregator
maps an offset to aggregator (offset / stripe_size) % avail_cb_nodes). One stripe means one
aggregator, whatever cb_nodes says, so one rank (the first of the aggregator list, rank 0
by default) moves every byte. The chain is checked link by link: the stripe count from the
LUSTRE module, collective calls from MPI-IO, and the consequence from POSIX (per-rank
records, the slowest/fastest rank's bytes of a shared record, or DXT). Without the
consequence (ROMIO left collective buffering off, as for large contiguous requests) no
finding is made.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iolens.analyze.darshan.drishti.common import col, human, node_count
from iolens.analyze.darshan.expert import thresholds as th
from iolens.analyze.darshan.expert.common import ExpertRule, figures, name_of
from iolens.analyze.darshan.rule import RuleContext
from iolens.analyze.darshan.zoomin.advice import gain, setstripe, stripe_count_for
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: where the aggregator count comes from, for the evidence
ROMIO_SOURCE = (
    "ROMIO ad_lustre_aggregate.c ADIOI_LUSTRE_Get_striping_info: avail_cb_nodes = "
    "stripe_count * min(cb_nodes / stripe_count, romio_lustre_co_ratio=1)"
)


def _busiest(job: DarshanJob, rid: int) -> tuple[int | None, float, float, str] | None:
    """(rank, its bytes, the file's POSIX bytes, source) of the rank moving the most bytes
    of file `rid`, from whichever of per-rank records, a shared record's slowest/fastest
    rank or DXT shows the most; None without POSIX bytes."""
    c = job.counters("POSIX")
    mine = c[c["id"] == np.uint64(rid)]
    if not len(mine):
        return None
    nbytes = (col(mine, "POSIX_BYTES_READ") + col(mine, "POSIX_BYTES_WRITTEN")).clip(lower=0)
    total = float(nbytes.sum())
    if total <= 0:
        return None
    best: tuple[int | None, float, float, str] = (None, 0.0, total, "")
    own = mine[mine["rank"] >= 0]
    if len(own):
        per = nbytes[own.index].groupby(own["rank"]).sum()
        best = (int(per.idxmax()), float(per.max()), total, "per-rank records")
    for _, r in mine[mine["rank"] < 0].iterrows():
        for which in ("SLOWEST", "FASTEST"):
            b = float(max(r.get(f"POSIX_{which}_RANK_BYTES", 0), 0))
            if b > best[1]:
                best = (int(r[f"POSIX_{which}_RANK"]), b, total, f"{which.lower()} rank bytes")
    d = job.dxt
    if d is not None and len(d):
        t = d[(d["module"] == "DXT_POSIX") & (d["id"] == np.uint64(rid))]
        if len(t):
            per = (t["length"] * t["count"]).groupby(t["rank"]).sum()
            if float(per.max()) > best[1]:
                best = (int(per.idxmax()), float(per.max()), total, "dxt")
    return best


def single_aggregator_files(job: DarshanJob, ctx: RuleContext) -> list[dict[str, Any]]:
    """Shared single-stripe files with collective calls whose busiest rank moved at least
    AGGREGATOR_SHARE of the POSIX bytes."""
    fig = figures(job, ctx)
    if "single" not in fig.memo:
        fig.memo["single"] = _single(job, ctx)
    return fig.memo["single"]


def _single(job: DarshanJob, ctx: RuleContext) -> list[dict[str, Any]]:
    lu = job.lustre
    if lu is None or not len(lu) or job.nprocs < 2:
        return []
    nodes, exact = node_count(job, ctx)
    if nodes == 1 and exact:
        return []  # one node has one aggregator anyway (cb_config_list "*:1")
    lay = figures(job, ctx).layers
    if not len(lay):
        return []
    coll = lay[(lay["m_coll_reads"] + lay["m_coll_writes"] > 0) & lay["shared"]]
    bar = th.get("AGGREGATOR_SHARE", ctx.extra)
    out = []
    stripes = pd.Series(lu["stripe_count"].to_numpy(), index=lu["id"].to_numpy(np.uint64))
    for rid, r in coll.iterrows():
        count = stripes.get(np.uint64(rid))
        if count is None or int(count) != 1:
            continue
        b = _busiest(job, int(rid))
        if b is None or b[1] < bar * b[2]:
            continue
        rank, rank_bytes, total, source = b
        out.append(
            {
                "id": int(rid),
                "path": name_of(job, rid),
                "stripe_count": 1,
                "collective_ops": int(r["m_coll_reads"] + r["m_coll_writes"]),
                "aggregator_rank": rank,
                "aggregator_bytes": int(rank_bytes),
                "file_bytes": int(total),
                "aggregator_share": round(rank_bytes / total, 4),
                "share_source": source,
                "nodes": nodes,
            }
        )
    return out


class SingleAggregator(ExpertRule):
    """A single-stripe shared file accessed collectively: one rank moves all its bytes.

    Symptom: a Lustre file with stripe count 1, shared by the ranks and accessed with
    collective MPI-IO calls, whose POSIX bytes come at least half (the zoom-in paper's
    MaxRankIO bar) from one rank.
    Why it hurts: ROMIO's Lustre driver uses as many collective-buffering aggregators as
    the file has stripes (times romio_lustre_co_ratio, 1 by default: MPICH's
    ad_lustre_aggregate.c, ADIOI_LUSTRE_Get_striping_info), so one stripe means one
    aggregator: every rank ships its data to it and waits while it writes alone, at
    one client's bandwidth, to one OST. Rank 0 then appears to carry the job's I/O.
    What to do: stripe the file before it is created (`lfs setstripe -c K -S 4M DIR`, or
    the MPI-IO hint `striping_factor` at creation); ROMIO then uses K aggregators, one
    per OST.
    """

    code = "X05"
    name = "single-stripe-single-aggregator"
    severity = "warning"
    thresholds = ("AGGREGATOR_SHARE",)
    basis = "bytes"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        files = single_aggregator_files(job, ctx)
        if not files:
            return None
        worst = max(files, key=lambda f: f["aggregator_bytes"])
        explained = float(sum(f["aggregator_bytes"] for f in files))
        moved = figures(job, ctx).fs_bytes
        share = explained / moved if moved > 0 else 0.0
        nodes = worst["nodes"]
        k = stripe_count_for(worst["file_bytes"], ctx.ost_total, at_least=2)
        if nodes:
            k = max(2, min(k, nodes))  # cb_nodes defaults to one per node: no use beyond
        rank = worst["aggregator_rank"]
        who = f"rank {rank}" if rank is not None else "one rank"
        chain = [
            {"link": "stripe_count", "value": 1, "path": worst["path"], "source": "LUSTRE"},
            {
                "link": "aggregators",
                "value": 1,
                "collective_ops": worst["collective_ops"],
                "source": ROMIO_SOURCE,
            },
            {
                "link": "aggregator_share",
                "value": worst["aggregator_share"],
                "rank": rank,
                "source": f"POSIX {worst['share_source']}",
            },
        ]
        evidence = {
            "chain": chain,
            "files": [{k2: v for k2, v in f.items() if k2 != "id"} for f in files[:5]],
            "aggregator_rank": rank,
            "aggregator_share": worst["aggregator_share"],
            "bytes_through_one_aggregator": int(explained),
            "share_of_bytes": round(share, 4),
            "nodes": nodes,
            "recommended_stripe_count": k,
        }
        rec = (
            f"{worst['path']} has one stripe, so ROMIO's Lustre driver gave its "
            f"{worst['collective_ops']:,} collective calls one aggregator and {who} moved "
            f"{worst['aggregator_share']:.0%} of its {human(worst['file_bytes'])}. Stripe it "
            f"before it is created: `{setstripe(job, worst['path'], k)}` (or "
            f'`MPI_Info_set(info, "striping_factor", "{k}")` when MPI-IO creates it); '
            f"ROMIO then uses {k} aggregators."
        )
        g = gain(float(k), f"{k} aggregators, one per OST, instead of 1")
        return self.finding(
            job,
            evidence,
            rec,
            severity=self.severity_for(ctx, share, nbytes=explained),
            gain=g,
            # what it explains: rank 0 / one rank carrying the I/O, the imbalance on the
            # shared file, the others waiting in MPI-IO; what explains it: the file on one
            # OST (Z02 reports the same stripe count as a bandwidth cap)
            explains=["DD01", "Z04", "DP18", "DP21", "X04"],
            explained_by=["Z02"],
        )
