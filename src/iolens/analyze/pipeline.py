"""Run the per-job analyses and rules over jobs and keep their results in the store."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import pyarrow as pa

from iolens import __version__
from iolens.analyze import report as job_report
from iolens.analyze import savings
from iolens.analyze.findings import JOB_RULES, JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.jobs import diagnose_jobs
from iolens.analyze.jobs.usage import Span
from iolens.errors import IolensError, StoreError
from iolens.model.finding import Finding, findings_table
from iolens.model.schema import ANALYSIS_ERRORS, JOB_SUMMARIES
from iolens.store import queries
from iolens.store.base import Store

log = logging.getLogger(__name__)

#: A progress callback: (stage, done, total) of the step under way.
Step = Callable[[str, int, int], None]


def analyze_jobs(
    store: Store,
    job_ids: Iterable[str] | None = None,
    silenced: frozenset[str] = frozenset(),
    on_job: Callable[[str], None] | None = None,
    reports: list[JobReport] | None = None,
    span: Span | None = None,
    on_step: Step | None = None,
) -> list[Finding]:
    """Re-derive the reports, phases, interference and findings of `job_ids` (all jobs by
    default), replacing older ones.

    Reports are built in bulk; the per-job diagnosis (phases, history, interference) needs
    every report first, since interference weighs all overlapping jobs at once. `reports`
    (with series, in `job_ids` order) are used instead when given: the distributed
    analysis builds them in parallel (`iolens.analyze.distributed`).

    One job whose data breaks an analysis costs only itself: the batch is split until the
    job is alone, its error is recorded in `analysis_errors` (and shown with the job), and
    the other jobs are analysed. A rule that raises on a job is recorded the same way and
    the job keeps its other findings. A job analysed here has its older errors cleared.

    `span` bounds the interference pass (default: the jobs' own run, widened to their
    neighbours): the live analysis of running jobs, which have no end, passes its window.

    `on_step(stage, done, total)` follows the work as it happens (a progress bar): each
    report built, the bulk diagnosis, each job's rules. `on_job` only fires per job at
    the end, after the bulk steps that take most of the time.
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
    failed: list[tuple[str, str, str]] = []  # (job, analysis, error)
    now = datetime.now(UTC).replace(tzinfo=None)
    _widen_traced_jobs(store, job_ids)
    reports = _diagnosed(store, job_ids, reports, everything, failed, span, on_step)
    box: list[dict[str, object] | None] = []  # the IO500 box, read once when first needed
    costs = savings.SystemCosts(store)  # the system's cost per byte, read once per day
    for rep in reports:
        job_id = rep.job_id
        rep.series = None
        mine: list[tuple[JobRule, Finding]] = []
        for rule in rules:
            try:
                f = rule.check(rep)
            except Exception as exc:  # a rule's bug costs that rule on that job
                failed.append((job_id, rule.code, _why(exc)))
                log.warning("rule %s failed on job %s: %s", rule.code, job_id, _why(exc))
                continue
            if f is not None:
                mine.append((rule, f))
        if mine:
            if not box:
                box.append(savings.io500_box(store))
            _estimate(store, rep, mine, box[0], costs, failed, reports)
        found += [f for _r, f in mine]
        summary = {k: getattr(rep, k) for k in JOB_SUMMARIES.names if hasattr(rep, k)}
        summaries.append({**summary, "findings": len(mine), "analyzed": now})
        if on_job:
            on_job(job_id)
        if on_step:
            on_step("checking rules", len(summaries), len(reports))
    done = [r.job_id for r in reports]
    stamps = queries.data_stamps(store, sorted({j for j, _a, _e in failed}))
    errors = [
        {"job_id": j, "analysis": a, "error": e, "iolens_version": __version__,
         "failed_at": now, "data_stamp": stamps.get(j)}
        for j, a, e in failed
    ]  # fmt: skip
    with store.transaction():
        store.register("_iolens_jobs", pa.table({"job_id": pa.array(done, pa.string())}))
        store.register("_iolens_tried", pa.table({"job_id": pa.array(job_ids, pa.string())}))
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
            store.execute(
                "DELETE FROM analysis_errors WHERE job_id IN (SELECT job_id FROM _iolens_tried)"
            )
        finally:
            store.unregister("_iolens_jobs")
            store.unregister("_iolens_tried")
        store.append("findings", findings_table(found))
        store.append("job_summaries", pa.Table.from_pylist(summaries, schema=JOB_SUMMARIES))
        if errors:
            store.append("analysis_errors", pa.Table.from_pylist(errors, schema=ANALYSIS_ERRORS))
    if on_job:
        for j in sorted({j for j, a, _e in failed if a in _WHOLE}):
            on_job(j)
    return found


def _estimate(
    store: Store,
    rep: JobReport,
    mine: list[tuple[JobRule, Finding]],
    box: dict[str, object] | None,
    costs: savings.SystemCosts,
    failed: list[tuple[str, str, str]],
    batch: list[JobReport],
) -> None:
    """Each finding's saving into its `gain`, and the findings ordered by it (largest
    first); a model that fails costs that estimate only."""
    ctx = savings.context(store, rep, box, costs, batch)
    for rule, f in mine:
        try:
            s = rule.saving(f, rep, ctx)
        except Exception as exc:
            failed.append((rep.job_id, f"{rule.code} saving", _why(exc)))
            log.warning("saving of %s failed on job %s: %s", rule.code, rep.job_id, _why(exc))
            continue
        if s is not None:
            f.gain = {**(f.gain or {}), **s.gain(ctx.cores)}
    mine.sort(key=lambda rf: -float((rf[1].gain or {}).get("seconds") or -1.0))


def _widen_traced_jobs(store: Store, job_ids: list[str]) -> None:
    """Trace-only jobs' rows from all their processes, not the first one shipped
    (`queries.refresh_traced_jobs`). A store that cannot take the widened rows (an older
    dataset's results, a read-only copy) keeps the rows as stored: the analysis goes on."""
    try:
        queries.refresh_traced_jobs(store, job_ids)
    except StoreError as exc:
        log.warning("trace-only job rows not widened: %s", exc)


#: Failures that leave the job without a summary (a rule's failure does not).
_WHOLE = ("report", "diagnosis")


def _diagnosed(
    store: Store,
    job_ids: list[str],
    reports: list[JobReport] | None,
    everything: bool,
    failed: list[tuple[str, str, str]],
    span: Span | None = None,
    on_step: Step | None = None,
) -> list[JobReport]:
    """Reports of `job_ids`, diagnosed (phases, history, interference). When a job breaks
    either step the set is halved until it is alone; it is left out and noted in
    `failed`, so one job costs O(log n) extra passes, not the whole batch."""
    stage = "report"
    try:
        if reports is None:
            built = iter(range(1, len(job_ids) + 1))
            reports = job_report.build_many(
                store,
                job_ids,
                with_series=True,
                on_job=(lambda _j: on_step("building reports", next(built), len(job_ids)))
                if on_step
                else None,
            )
        stage = "diagnosis"
        if reports:
            if on_step:
                on_step("phases and interference", 0, 1)
            diagnose_jobs(store, reports, everything, span)
            if on_step:
                on_step("phases and interference", 1, 1)
        return reports
    except IolensError:
        raise  # the store, not a job
    except Exception as exc:
        error = exc
    if len(job_ids) <= 1:
        for j in job_ids:
            failed.append((j, stage, _why(error)))
            log.warning("%s of job %s failed: %s", stage, j, _why(error))
            log.debug("%s of job %s failed", stage, j, exc_info=error)
        return []
    half = len(job_ids) // 2
    out: list[JobReport] = []
    for part in (job_ids[:half], job_ids[half:]):
        mine = set(part)
        given = None if reports is None else [r for r in reports if r.job_id in mine]
        out += _diagnosed(store, part, given, False, failed, span, on_step)
    return out


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def analyze_all(store: Store, on_job: Callable[[str], None] | None = None) -> None:
    """Everything: per-job reports and findings, then the component detectors."""
    from iolens.analyze.components import analyze_components

    analyze_jobs(store, on_job=on_job)
    analyze_components(store)
