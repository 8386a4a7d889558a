"""Diagnosis of Darshan logs: the zoom-in root causes, Drishti's triggers (fixed) and the
expert rules.

`diagnose` is pure (a log in, findings out: what the benchmarks and the Drishti comparison
call); `analyze_log` adds what the store knows (the scheduler's nodes, the OSTs' peak
bandwidth, the file-system weather before the job) and keeps the factors row.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from iolens.analyze.darshan import chains, drishti, expert, savings, severity, zoomin
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.darshan_own import application_view
from iolens.model.finding import Finding, findings_table
from iolens.store.base import Store

#: Every code a Darshan diagnosis owns: a re-diagnosis replaces all of them (retired ones
#: too, so their old findings go).
CODES: frozenset[str] = frozenset(
    {r.code for r in zoomin.RULES}
    | {r.code for r in drishti.RULES}
    | {r.code for r in expert.RULES}
    | drishti.RETIRED_CODES
)


def rule_findings(job: DarshanJob, ctx: RuleContext | None = None) -> list[Finding]:
    """Every rule's finding as the rule states it: zoom-in root causes first (they name the
    cause), then Drishti's triggers, then the expert rules (cross-layer, DXT timing,
    ROMIO's aggregators); on the application's records only (Darshan's own are left out:
    `application_view`)."""
    ctx = ctx if ctx is not None else RuleContext()
    job = application_view(job)
    return zoomin.diagnose_zoomin(job, ctx) + drishti.diagnose(job, ctx) + expert.diagnose(job, ctx)


def diagnose(job: DarshanJob, ctx: RuleContext | None = None) -> list[Finding]:
    """The log's findings as an expert signs them: contradictions dropped, causal chains
    with one recommendation each (`chains`), severity capped by the share of the I/O each
    explains and by the noise floor (`severity`), each fix's saving in seconds
    (`savings`), ordered by that saving."""
    ctx = ctx if ctx is not None else RuleContext()
    found = chains.assemble(rule_findings(job, ctx), job)
    severity.calibrate(found, severity.JobIO.of(job), ctx)
    savings.attach(application_view(job), found)
    return savings.ordered(found)


def diagnose_job(logs: list[DarshanJob], ctx: RuleContext | None = None) -> list[Finding]:
    """The findings of one job read from several logs (one per executable run): each log
    diagnosed, then a finding raised by several logs merged into one with the count."""
    return chains.merged(f for log in logs for f in diagnose(log, ctx))


def merge_stored(store: Store, job_ids: list[str]) -> int:
    """Merge the stored Darshan findings of `job_ids` that several logs of one job raised
    (the importer diagnoses log by log); returns how many rows went."""
    if not job_ids:
        return 0
    store.register("_iolens_merge_jobs", pa.table({"job_id": pa.array(job_ids, pa.string())}))
    try:
        rows = store.query(
            "SELECT f.* FROM findings f JOIN _iolens_merge_jobs j ON f.subject_id = j.job_id "
            "WHERE f.subject_kind = 'job' AND f.code IN (SELECT unnest(?))",
            [sorted(CODES)],
        ).to_pylist()
        found = [_stored(r) for r in rows]
        merged = chains.merged(found)
        if len(merged) == len(found):
            return 0
        store.execute(
            "DELETE FROM findings WHERE subject_kind = 'job' AND subject_id IN "
            "(SELECT job_id FROM _iolens_merge_jobs) AND code IN (SELECT unnest(?))",
            [sorted(CODES)],
        )
    finally:
        store.unregister("_iolens_merge_jobs")
    store.append("findings", findings_table(merged))
    return len(found) - len(merged)


def _stored(r: dict[str, Any]) -> Finding:
    ev = json.loads(r["evidence"] or "{}")
    return Finding(
        code=r["code"],
        name=r["name"],
        severity=r["severity"],
        subject_kind=r["subject_kind"],
        subject_id=r["subject_id"],
        evidence=ev,
        recommendation=r["recommendation"],
        start=r["start"],
        end=r["end"],
        created=r["created"],
        target=r["target"],
        gain=json.loads(r["gain"]) if r["gain"] else None,
        explains=ev.get("explains"),
        explained_by=ev.get("explained_by"),
    )


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


__all__ = [
    "CODES",
    "RuleContext",
    "analyze_log",
    "diagnose",
    "diagnose_job",
    "merge_stored",
    "rule_findings",
    "site_context",
]
