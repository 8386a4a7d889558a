"""Metadata server load over time, and who causes it (Beacon section 4.3, Figure 10).

Beacon found the single MDS busy above 75 % of its peak a quarter of the time, and that
most of the load came not from jobs but from users working on login nodes straight on the
scratch file system. The same split here: the MDS totals (`server_samples` rows with no
job, kind `mds` or the agent's per-target `mdt`) against the jobs' shares (Lustre jobstats
rows naming a job); whatever the jobs do not account for came from other clients — login
nodes, data movers, interactive use, or processes the job id tagging missed.

`other = total - jobs` exactly, so the split always adds up to the total; a negative
value would mean jobstats counted more than the totals (two clocks disagreeing).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from iolens.analyze.system._common import window_sql
from iolens.store.base import Store

MDS_KINDS = ("mds", "mdt")
#: Load brackets of the distribution over time (Figure 10(a)), as fractions of capacity.
BRACKETS = ((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, float("inf")))


@dataclass
class MdsBin:
    start: datetime
    total_ops: int
    job_ops: int
    other_ops: int  # total - job shares: login nodes and other clients
    other_share: float | None
    mean_rate: float  # ops/s over the seconds the samples cover
    peak_rate: float  # highest per-sample rate, ops/s
    peak_load: float | None  # peak_rate / capacity


@dataclass
class MdsView:
    components: list[str]
    capacity: float | None  # ops/s: summed peak_ops, else the highest rate seen
    capacity_source: str | None  # "benchmark" | "observed"
    bin_s: int
    total_ops: int
    job_ops: int
    other_ops: int
    job_share: float | None
    other_share: float | None
    bins: list[MdsBin]
    load_levels: dict[str, float]  # share of sampled time per load bracket
    time_above_75: float | None  # Beacon: 26.8 % of the time on TaihuLight
    top_jobs: list[dict[str, object]]  # job_id, ops, share of the total


def _label(lo: float, hi: float) -> str:
    return f">= {lo:.0%}" if hi == float("inf") else f"{lo:.0%}-{hi:.0%}"


def mds_load(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    bin_s: int = 3600,
    top: int = 10,
) -> MdsView:
    """MDS load per `bin_s` bin split into jobs and other clients, plus its distribution."""
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    where, params = window_sql(start, end)
    step = int(bin_s) * 1_000_000
    base = (
        "FROM server_samples WHERE kind IN ('mds', 'mdt') AND md_ops IS NOT NULL "
        f"AND interval_s > 0{where}"
    )
    bins = store.query(
        f"""
        SELECT make_timestamp((epoch_us(ts) - 1) // {step} * {step}) AS bin,
               sum(md_ops) FILTER (WHERE job_id IS NULL) AS total,
               sum(md_ops) FILTER (WHERE job_id IS NOT NULL) AS jobs,
               sum(interval_s) FILTER (WHERE job_id IS NULL) AS secs,
               count(DISTINCT component_id) FILTER (WHERE job_id IS NULL) AS comps
        {base} GROUP BY bin ORDER BY bin
        """,
        params,
    ).to_pylist()
    # The rate at each sample time, summed over MDS components (several MDTs serve together).
    per_ts = store.query(
        f"""
        SELECT make_timestamp((epoch_us(ts) - 1) // {step} * {step}) AS bin,
               sum(md_ops / interval_s) AS rate, max(interval_s) AS secs
        {base} AND job_id IS NULL GROUP BY ts ORDER BY ts
        """,
        params,
    ).to_pylist()
    comps = store.query(
        f"SELECT DISTINCT component_id {base} AND job_id IS NULL ORDER BY component_id", params
    )
    components = comps.column("component_id").to_pylist()
    capacity: float | None = None
    source: str | None = None
    if components:
        caps = store.query(
            "SELECT sum(peak_ops) AS cap, count(peak_ops) AS n FROM components "
            f"WHERE component_id IN ({', '.join('?' for _ in components)}) AND peak_ops > 0",
            components,
        ).to_pylist()[0]
        if caps["n"] == len(components):
            capacity, source = float(caps["cap"]), "benchmark"
        elif per_ts:
            capacity, source = max(float(r["rate"]) for r in per_ts) or None, "observed"
    peaks: dict[datetime, float] = {}
    for r in per_ts:
        peaks[r["bin"]] = max(peaks.get(r["bin"], 0.0), float(r["rate"]))
    out: list[MdsBin] = []
    for b in bins:
        total, jobs = int(b["total"] or 0), int(b["jobs"] or 0)
        secs = float(b["secs"] or 0.0) / max(1, int(b["comps"] or 0))
        peak = peaks.get(b["bin"], 0.0)
        out.append(
            MdsBin(
                start=b["bin"],
                total_ops=total,
                job_ops=jobs,
                other_ops=total - jobs,
                other_share=(total - jobs) / total if total else None,
                mean_rate=total / secs if secs else 0.0,
                peak_rate=peak,
                peak_load=peak / capacity if capacity else None,
            )
        )
    weights = [0.0] * len(BRACKETS)
    for r in per_ts:
        load = float(r["rate"]) / capacity if capacity else 0.0
        for i, (lo, hi) in enumerate(BRACKETS):
            if lo <= load < hi:
                weights[i] += float(r["secs"] or 0.0)
    covered = sum(weights)
    levels = {
        _label(lo, hi): (w / covered if covered else 0.0)
        for (lo, hi), w in zip(BRACKETS, weights, strict=True)
    }
    total = sum(b.total_ops for b in out)
    jobs = sum(b.job_ops for b in out)
    top_jobs = store.query(
        f"SELECT job_id, sum(md_ops) AS ops {base} AND job_id IS NOT NULL "
        f"GROUP BY job_id ORDER BY ops DESC, job_id LIMIT {int(top)}",
        params,
    ).to_pylist()
    return MdsView(
        components=components,
        capacity=capacity,
        capacity_source=source,
        bin_s=int(bin_s),
        total_ops=total,
        job_ops=jobs,
        other_ops=total - jobs,
        job_share=jobs / total if total else None,
        other_share=(total - jobs) / total if total else None,
        bins=out,
        load_levels=levels,
        time_above_75=weights[-1] / covered if covered else None,
        top_jobs=[
            {"job_id": r["job_id"], "ops": int(r["ops"]), "share": int(r["ops"]) / total}
            if total
            else {"job_id": r["job_id"], "ops": int(r["ops"]), "share": None}
            for r in top_jobs
        ],
    )
