"""Diagnosis of Darshan logs: the zoom-in root causes, Drishti's triggers (fixed) and the
expert rules.

`diagnose` is pure (a log in, findings out: what the benchmarks and the Drishti comparison
call); `analyze_log` adds what the store knows (the scheduler's nodes, the OSTs' peak
bandwidth, the file-system weather before the job) and keeps the factors row.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from iolens.analyze.darshan import drishti, expert, zoomin
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.darshan_own import application_view
from iolens.model.finding import Finding
from iolens.store.base import Store

#: Every code a Darshan diagnosis owns: a re-diagnosis replaces all of them (retired ones
#: too, so their old findings go).
CODES: frozenset[str] = frozenset(
    {r.code for r in zoomin.RULES}
    | {r.code for r in drishti.RULES}
    | {r.code for r in expert.RULES}
    | drishti.RETIRED_CODES
)


def diagnose(job: DarshanJob, ctx: RuleContext | None = None) -> list[Finding]:
    """Zoom-in root causes first (they name the cause), then Drishti's triggers, then the
    expert rules (cross-layer, DXT timing, ROMIO's aggregators); on the application's
    records only (Darshan's own are left out: `application_view`)."""
    ctx = ctx if ctx is not None else RuleContext()
    job = application_view(job)
    return zoomin.diagnose_zoomin(job, ctx) + drishti.diagnose(job, ctx) + expert.diagnose(job, ctx)


def site_context(store: Store) -> RuleContext:
    """What the topology says about the OSTs: how many, and one's peak bandwidth."""
    row = store.query(
        "SELECT count(*) AS n, median(peak_bw) AS bw FROM components WHERE kind = 'ost'"
    ).to_pylist()[0]
    n, bw = int(row["n"] or 0), row["bw"]
    return RuleContext(ost_total=n or None, ost_bw=float(bw) if bw else None)


def analyze_log(
    store: Store, job: DarshanJob, site: RuleContext | None = None
) -> tuple[list[Finding], dict[str, Any]]:
    """Findings and the Table I factors row of one log, with the store's context."""
    site = site if site is not None else site_context(store)
    job = application_view(job)
    sched = store.query(
        'SELECT "user", app, nodes FROM jobs WHERE job_id = ? LIMIT 1', [job.job_id]
    ).to_pylist()
    sched_row = sched[0] if sched else {}
    nodes = sched_row.get("nodes") or None
    osts = None
    if job.lustre is not None and len(job.lustre):
        osts = sorted({int(o) for row in job.lustre["osts"] for o in row})
    weather = zoomin.weather_before(store, job.start, osts)
    ctx = replace(site, weather=weather, extra=dict(site.extra))
    if nodes:
        ctx.extra["nodes"] = len(nodes)
        ctx.extra["nnodes"] = len(nodes)
    found = diagnose(job, ctx)
    row = zoomin.job_factors(
        job,
        weather,
        nodes=nodes,
        user=sched_row.get("user"),
        app=sched_row.get("app") or (job.exe.split()[0].rsplit("/", 1)[-1] if job.exe else None),
    )
    row["computed"] = datetime.now(UTC).replace(tzinfo=None)
    return found, row


__all__ = ["CODES", "RuleContext", "analyze_log", "diagnose", "site_context"]
