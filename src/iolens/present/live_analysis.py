"""Incremental analysis of running jobs, a task of the scheduler (`scheduling.py`).

A job that only gets analysed once it ends tells its owner nothing while it still can be
stopped or fixed. With the tracer shipping every 30 s, a running job's data grows; each
pass re-analyses the running jobs whose data changed (`queries.data_stamps`), with the
work bounded three ways:

- per job: at most once every `every` seconds (default 60);
- per pass: at most `limit` jobs (default 8), the longest-waiting first;
- per analysis: the interference window is the job's newest `window_s` seconds of data
  (default 1 h) rather than its whole run; the job's own report and phases still cover
  its records since its start, which the summary totals need.

The summary written is the ordinary one, with `analyzed` before the job's end (the job
has none yet): provisional until the ended-job pass replaces it. The history rule (IOL006)
is silenced — it judges whole phases, and a running job's last phase is cut short by the
present — and the live bandwidth check (`analyze.jobs.live`) stands in for it: an IOL006
finding when the job's newest data is `SLOW_FACTOR` slower than its earlier runs. The
ended-job analysis re-derives IOL006 from whole phases and so replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from iolens.analyze.jobs import live
from iolens.model.finding import Finding, findings_table
from iolens.store.base import Store

#: Interference window of a live analysis: the newest hour of the jobs' data.
WINDOW_S = 3600.0
LIVE_CODE = "IOL006"

RUNNING_SQL = """
SELECT job_id FROM jobs
WHERE ("end" IS NULL OR upper(coalesce(state, '')) = 'RUNNING')
  AND job_id IN (SELECT DISTINCT job_id FROM client_io)
ORDER BY job_id
"""


@dataclass
class LiveTracker:
    """What the scheduler remembers between passes: per job, the data stamp it analysed
    and when (monotonic seconds). Lost on restart, which costs one extra analysis."""

    stamps: dict[str, str] = field(default_factory=dict)
    when: dict[str, float] = field(default_factory=dict)

    def due(self, stamps: dict[str, str], clock: float, every: float, limit: int) -> list[str]:
        """Jobs whose data changed and that were not analysed in the last `every` s,
        at most `limit`, the least recently analysed first."""
        changed = [
            j
            for j, s in stamps.items()
            if self.stamps.get(j) != s and clock - self.when.get(j, -1e18) >= every
        ]
        changed.sort(key=lambda j: (self.when.get(j, -1e18), j))
        return changed[:limit]

    def done(self, stamps: dict[str, str], clock: float) -> None:
        for j, s in stamps.items():
            self.stamps[j] = s
            self.when[j] = clock

    def forget_except(self, running: set[str]) -> None:
        for d in (self.stamps, self.when):
            for j in [j for j in d if j not in running]:
                del d[j]


def running_stamps(store: Store) -> dict[str, str]:
    """Data stamps of the running jobs that have client data."""
    from iolens.store.queries import data_stamps

    ids = store.query(RUNNING_SQL).column("job_id").to_pylist()
    return data_stamps(store, ids)


def analyze_running(store: Store, job_ids: list[str], window_s: float = WINDOW_S) -> list[Finding]:
    """Analyse running jobs over their data so far (interference: newest `window_s`), and
    add the live slowdown finding where the newest data is much slower than before."""
    from iolens.analyze import report as job_report
    from iolens.analyze.jobs.usage import Span
    from iolens.analyze.pipeline import analyze_jobs

    if not job_ids:
        return []
    newest = (
        store.query(
            "SELECT epoch_us(max(t_end)) / 1e6 AS t FROM client_io "
            "WHERE job_id IN (SELECT unnest(?))",
            [job_ids],
        )
        .column("t")[0]
        .as_py()
    )
    if newest is None:
        return []
    reports = job_report.build_many(store, job_ids, with_series=True)
    starts = [r.start.replace(tzinfo=UTC).timestamp() for r in reports if r.start]
    lo = max(min(starts, default=newest - window_s), newest - window_s)
    # The history rule judges whole phases: a running job's last phase is cut short by
    # the present and would read as an outlier. Silenced here (its old finding still goes),
    # the live bandwidth check stands in for it until the job ends.
    found = analyze_jobs(
        store,
        [r.job_id for r in reports],
        silenced=frozenset({LIVE_CODE}),
        reports=reports,
        span=Span(lo, newest + 1),
    )
    jobs = store.query(
        "SELECT * FROM jobs WHERE job_id IN (SELECT unnest(?))", [job_ids]
    ).to_pylist()
    extra = [f for job in jobs if (f := slowdown_finding(store, job))]
    if extra:
        store.append("findings", findings_table(extra))
    return found + extra


def slowdown_finding(store: Store, job: dict[str, Any]) -> Finding | None:
    """IOL006 for a running job whose newest data is far slower than its baseline."""
    chk = live.bandwidth_check(store, job)
    if not chk["slower"]:
        return None
    end = chk["newest_record"]
    start = None
    if isinstance(end, datetime):
        from datetime import timedelta

        start = end - timedelta(seconds=chk["window_s"])
    slow = round(1 / chk["ratio"], 1) if chk["ratio"] else None
    return Finding(
        code=LIVE_CODE,
        name="Slower than earlier runs (live)",
        severity="warning",
        subject_kind="job",
        subject_id=job["job_id"],
        evidence={
            "live": True,
            "current_bw": chk["current_bw"],
            "baseline_bw": chk["baseline_bw"],
            "baseline": chk["baseline"],
            "earlier_runs": chk["earlier_runs"],
            "slowdown": slow,
            "window_s": chk["window_s"],
        },
        recommendation=(
            f"The job's I/O of the last {chk['window_s']:.0f} s ran about {slow}x slower than "
            f"{chk['baseline']}. Check the job page for neighbours and servers in trouble; "
            "the analysis at the job's end replaces this provisional finding."
        ),
        start=start,
        end=end if isinstance(end, datetime) else None,
        target="admin",
    )
