"""Run the per-job analyses and rules over jobs and keep their results in the store."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import pyarrow as pa

from iolens.analyze import report as job_report
from iolens.analyze.findings import JOB_RULES
from iolens.analyze.jobreport import JobReport
from iolens.analyze.jobs import diagnose_jobs
from iolens.model.finding import Finding, findings_table
from iolens.model.schema import JOB_SUMMARIES
from iolens.store.base import Store


def analyze_jobs(
    store: Store,
    job_ids: Iterable[str] | None = None,
    silenced: frozenset[str] = frozenset(),
    on_job: Callable[[str], None] | None = None,
    reports: list[JobReport] | None = None,
) -> list[Finding]:
    """Re-derive the reports, phases, interference and findings of `job_ids` (all jobs by
    default), replacing older ones.

    Reports are built in bulk; the per-job diagnosis (phases, history, interference) needs
    every report first, since interference weighs all overlapping jobs at once. `reports`
    (with series, in `job_ids` order) are used instead when given: the distributed
    analysis builds them in parallel (`iolens.analyze.distributed`).
    """
    everything = job_ids is None
    if job_ids is None:
        job_ids = (
            store.query("SELECT job_id FROM jobs ORDER BY job_id").column("job_id").to_pylist()
        )
    job_ids = list(job_ids)
    rules = [rule() for rule in JOB_RULES if rule.code not in silenced]
    found: list[Finding] = []
    summaries: list[dict[str, object]] = []
    now = datetime.now(UTC).replace(tzinfo=None)
    if reports is None:
        reports = job_report.build_many(store, job_ids, with_series=True)
    if reports:
        diagnose_jobs(store, reports, everything)
    for rep in reports:
        job_id = rep.job_id
        rep.series = None
        mine = [f for rule in rules if (f := rule.check(rep)) is not None]
        found += mine
        summary = {k: getattr(rep, k) for k in JOB_SUMMARIES.names if hasattr(rep, k)}
        summaries.append({**summary, "findings": len(mine), "analyzed": now})
        if on_job:
            on_job(job_id)
    with store.transaction():
        store.register("_iolens_jobs", pa.table({"job_id": job_ids}))
        try:
            # only this family's codes: the Darshan rules keep theirs (import darshan)
            store.execute(
                "DELETE FROM findings WHERE subject_kind = 'job' "
                "AND subject_id IN (SELECT job_id FROM _iolens_jobs) "
                "AND code IN (SELECT unnest(?))",
                [[rule.code for rule in JOB_RULES]],
            )
            store.execute(
                "DELETE FROM job_summaries WHERE job_id IN (SELECT job_id FROM _iolens_jobs)"
            )
        finally:
            store.unregister("_iolens_jobs")
        store.append("findings", findings_table(found))
        store.append("job_summaries", pa.Table.from_pylist(summaries, schema=JOB_SUMMARIES))
    return found


def analyze_all(store: Store, on_job: Callable[[str], None] | None = None) -> None:
    """Everything: per-job reports and findings, then the component detectors."""
    from iolens.analyze.components import analyze_components

    analyze_jobs(store, on_job=on_job)
    analyze_components(store)
