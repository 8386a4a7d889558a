"""metadata_storm: the metadata server overloaded by clients that are not jobs.

Beacon 4.1 (MDS request priority) and its advice against "using the parallel file system
for metadata-heavy interactive tasks": `ls -R`, `find` or scripts on login nodes flood the
single MDS and every job's opens and stats queue behind them. The MDT's jobstats say how
many operations each job issued; the total minus the job shares is what other clients
(login and service nodes) sent. A minute is a storm minute when the MDS works at or near
its benchmarked capacity (or queues requests when the capacity is unknown) and most of
its operations belong to no job. A job-driven overload (an mdtest-like job) is not a
storm: it is the job's own finding (IOL005) and interference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iolens.analyze.components.base import (
    Context,
    Episode,
    duration_class,
    nanmedian,
    r,
    runs,
    top_jobs,
    verdict,
)


@dataclass(frozen=True)
class StormThresholds:
    load: float = 0.8  # metadata ops/s at least this share of the MDS peak_ops ...
    queue: float = 4.0  # ... or this mean request queue (demand beyond what it serves)
    other_share: float = 0.5  # most ops come from clients without a job ...
    other_dominant: float = 0.5  # ... or those clients alone take this share of the peak
    other_load: float = 0.25  # and in any case they alone are at least this share of it
    max_gap: int = 2
    min_minutes: int = 3
    critical_load: float = 1.0  # at capacity: everyone's metadata queues


@dataclass
class MetadataStorm:
    name: str = "metadata_storm"
    kind: str = "metadata_storm"
    thresholds: StormThresholds = field(default_factory=StormThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        th = self.thresholds
        g = ctx.grid("mds")
        if g.minutes == 0:
            return []
        shares = ctx.job_shares("mds", "sum(coalesce(md_ops, 0))::DOUBLE AS md_ops")
        jobs_md = np.zeros_like(g.md_ops)
        if shares.num_rows:
            index = {c: i for i, c in enumerate(g.ids)}
            comp = shares.column("component_id").to_pylist()
            ci = np.array([index.get(c, -1) for c in comp], np.int64)
            col = shares.column("col").to_numpy()
            ok = (ci >= 0) & (col >= 0) & (col < g.minutes)
            np.add.at(jobs_md, (ci[ok], col[ok]), shares.column("md_ops").to_numpy()[ok])
        total = g.md_ops
        other = np.maximum(total - jobs_md, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = total / g.seconds
            other_rate = other / g.seconds
            other_share = np.where(total > 0, other / total, 0.0)
        peaks = np.array(
            [(ctx.components("mds").get(c) or {}).get("peak_ops") or np.nan for c in g.ids]
        )[:, None]
        known = np.isfinite(peaks)
        with np.errstate(invalid="ignore"):
            load = rate / peaks
            overloaded = (known & (load >= th.load)) | (g.queue >= th.queue)
            heavy = np.where(known, other_rate >= th.other_load * peaks, True)
            dominant = np.where(known, other_rate >= th.other_dominant * peaks, False)
        valid = (total > 0) & (g.seconds > 0)
        abnormal = valid & overloaded & heavy & ((other_share >= th.other_share) | dominant)
        logins = sorted(ctx.components("login"))
        out = []
        for ci, comp in enumerate(g.ids):
            for a, b in runs(abnormal[ci], valid[ci], th.max_gap, th.min_minutes):
                start, end = g.time(a), g.time(b + 1)
                if end <= ctx.start or start >= ctx.end:
                    continue
                sl = slice(a, b + 1)
                ab = abnormal[ci, sl]
                share = float(other[ci, sl].sum() / max(total[ci, sl].sum(), 1))
                peak_load = float(nanmedian(load[ci, sl][ab])) if known[ci, 0] else None
                evidence: dict[str, Any] = {
                    "summary": (
                        f"{share:.0%} of {comp}'s metadata operations came from clients "
                        f"without a job ({', '.join(logins) or 'login/service nodes'})"
                    ),
                    "source": "clients without a job",
                    "source_candidates": logins,
                    "source_share": round(share, 3),
                    "source_ops_rate": r(float(np.median(other_rate[ci, sl][ab])), 1),
                    "md_ops_rate": r(float(np.median(rate[ci, sl][ab])), 1),
                    "peak_ops": None if not known[ci, 0] else float(peaks[ci, 0]),
                    "load": r(peak_load),
                    "queue_len": r(float(nanmedian(g.queue[ci, sl][ab])), 2),
                    "wait_us": r(float(nanmedian(g.wait[ci, sl][ab])), 1),
                    "abnormal_minutes": int(ab.sum()),
                    "duration_class": duration_class(start, end),
                    "jobs": top_jobs(shares, comp, a, b, "md_ops"),
                    **verdict(abnormal[ci], valid[ci], b),
                }
                ongoing = ctx.open_ended and b >= int(np.flatnonzero(g.seconds[ci] > 0)[-1])
                severe = peak_load is not None and peak_load >= th.critical_load
                out.append(
                    Episode(
                        kind=self.kind,
                        component_kind="mds",
                        component_id=comp,
                        start=start,
                        end=None if ongoing else end,
                        severity="critical" if severe else "warning",
                        evidence=evidence,
                        detector=self.name,
                    )
                )
        return out
