"""Per-job diagnosis after the reports: I/O phases, history anomalies, interference,
straggler servers within a job.

Order matters: phases come from each job's own bandwidth series; the history check needs
the phases of earlier runs of the same application; interference needs every overlapping
job's load at once, so it runs over the analysed time span in one pass; and the history
finding (IOL006) then quotes the neighbours and culprits of the slow phases.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.jobreport import JobReport
from iolens.analyze.jobs import history, interference, phases, stragglers
from iolens.analyze.jobs.neighbours import neighbours
from iolens.analyze.jobs.usage import EVERYTHING, Span
from iolens.store.base import Store

MAX_NEIGHBOURS = 10


def _detect(rep: JobReport, spans: list[tuple[float, float]]) -> list[phases.Phase]:
    s = rep.series
    if s is None or len(s.read) == 0:
        return []
    found = phases.merge_within(phases.detect(s.origin, s.read, s.write, s.md), spans)
    found = phases.widen(found, spans, s.origin, s.read, s.write, s.md)
    return phases.busy_span(found, s.origin, s.read, s.write, s.md)


def _history_runs(
    store: Store, reports: list[JobReport], found: dict[str, list[phases.Phase]]
) -> dict[tuple[Any, ...], list[history.Run]]:
    """Runs per (app, processes, nodes): stored phases of other jobs plus the new ones."""
    groups: dict[tuple[Any, ...], list[history.Run]] = defaultdict(list)
    mine = {r.job_id for r in reports}
    for r in reports:
        if r.start is None:
            continue
        pts = [history.PhasePoint(p.busy_s, p.nbytes or p.md_ops) for p in found[r.job_id]]
        groups[(r.app, r.nprocs, r.nodes)].append(history.Run(r.job_id, r.start.timestamp(), pts))
    keys = pa.table(
        {
            "app": [k[0] for k in groups],
            "nprocs": pa.array([k[1] for k in groups], pa.int32()),
            "nnodes": pa.array([k[2] for k in groups], pa.int64()),
        }
    )
    store.register("_iolens_groups", keys)
    try:
        rows = store.query(
            "SELECT j.job_id, j.app, j.nprocs, len(j.nodes) AS nnodes, epoch(j.start) AS t, "
            'coalesce(p.busy_s, epoch(p."end") - epoch(p.start)) AS d, '
            "coalesce(p.read_bytes, 0) + coalesce(p.write_bytes, 0) AS v, p.md_ops AS md "
            "FROM job_phases p JOIN jobs j USING (job_id) "
            "JOIN _iolens_groups g ON g.app = j.app AND g.nprocs = j.nprocs "
            "AND g.nnodes = len(j.nodes) ORDER BY j.job_id, p.phase"
        ).to_pylist()
    finally:
        store.unregister("_iolens_groups")
    stored: dict[str, history.Run] = {}
    for row in rows:
        if row["job_id"] in mine:
            continue
        run = stored.get(row["job_id"])
        if run is None:
            run = stored[row["job_id"]] = history.Run(row["job_id"], row["t"], [])
            groups[(row["app"], row["nprocs"], row["nnodes"])].append(run)
        run.phases.append(history.PhasePoint(row["d"], row["v"] or row["md"] or 0))
    return groups


def _slowdown(
    p: phases.Phase, runs: list[history.Run], job_id: str, quantiles: tuple[int, ...] = ()
) -> Any:
    """Busy time over the median busy time of earlier phases of about the same volume
    (with `quantiles`: a list, over those percentiles of theirs)."""
    vol = p.nbytes or p.md_ops
    alike = [
        q.duration
        for r in runs
        if r.job_id != job_id and r.start < p.start
        for q in r.phases
        if vol / 1.6 <= q.volume <= vol * 1.6
    ]
    if not alike:
        return None
    if quantiles:
        return [round(p.busy_s / max(float(np.percentile(alike, q)), 1e-3), 2) for q in quantiles]
    return round(p.busy_s / float(np.median(alike)), 2)


#: How far the interference span may grow beyond the analysed jobs' own (seconds).
MAX_WIDEN_S = 6 * 3600.0


def _with_overlapping(store: Store, span: Span) -> Span:
    """`span` widened to the jobs that ran during it (within MAX_WIDEN_S): bursts are cut
    from open..close records inside the span, so a culprit that started before the first
    analysed job (or ends after the last) would otherwise lose the burst that hurt it."""
    if span.lo is None or span.hi is None:
        return span
    # naive datetimes, as the reports' start/end (whose .timestamp() made the span)
    row = store.query(
        'SELECT min("start") AS s, max("end") AS e FROM jobs '
        'WHERE "start" < ? AND ("end" IS NULL OR "end" > ?)',
        [datetime.fromtimestamp(span.hi), datetime.fromtimestamp(span.lo)],
    ).to_pylist()[0]
    lo = min(span.lo, row["s"].timestamp()) if row["s"] else span.lo
    hi = max(span.hi, row["e"].timestamp() + 1) if row["e"] else span.hi
    return Span(max(lo, span.lo - MAX_WIDEN_S), min(hi, span.hi + MAX_WIDEN_S))


def diagnose_jobs(
    store: Store, reports: list[JobReport], everything: bool, span: Span | None = None
) -> None:
    """Interference, phases and history anomalies of `reports`, stored; sets `rep.history`.

    Interference runs first: its bursts (open..close spans) also join the wavelet phases
    that a throttled phase broke apart.
    """
    # Interference over the span of the analysed jobs (culprits may be any job).
    if span is not None:
        pass  # the caller's window (running jobs: their newest data, capped)
    elif everything:
        span = EVERYTHING
    else:
        starts = [r.start.timestamp() for r in reports if r.start]
        ends = [r.end.timestamp() for r in reports if r.end]
        span = Span(min(starts), max(ends) + 1) if starts and ends else EVERYTHING
        span = _with_overlapping(store, span)
    n1 = interference.n1_jobs(store, {r.job_id: r.io_mode for r in reports})
    diag = interference.diagnose(store, span, n1)
    interference.store_diagnosis(store, diag, [r.job_id for r in reports], span)

    found = {
        r.job_id: _detect(r, [(b.start, b.end) for b in diag.bursts.get(r.job_id, [])])
        for r in reports
    }
    groups = _history_runs(store, reports, found)
    anomalous: dict[str, list[bool]] = {}
    for runs in groups.values():
        verdict = history.judge(runs)
        anomalous.update({j: v for j, v in verdict.items() if j in found})
    ids = pa.table({"job_id": pa.array(list(found), pa.string())})
    store.register("_iolens_phase_jobs", ids)
    try:
        with store.transaction():
            store.execute(
                "DELETE FROM job_phases WHERE job_id IN (SELECT job_id FROM _iolens_phase_jobs)"
            )
            store.append("job_phases", phases.phases_table(found, anomalous))
    finally:
        store.unregister("_iolens_phase_jobs")

    slow = stragglers.find(store, reports)
    for rep in reports:
        rep.stragglers = slow.get(rep.job_id, [])

    by_victim: dict[str, list[interference.Contribution]] = defaultdict(list)
    for p in diag.pairs:
        by_victim[p.victim].append(p)
    key_of = {r.job_id: (r.app, r.nprocs, r.nodes) for r in reports}
    for rep in reports:
        # a job without a start has no place in its history (never judged): no flags
        flags = anomalous.get(rep.job_id) or [False] * len(found[rep.job_id])
        slow = [
            (i, p) for i, (p, bad) in enumerate(zip(found[rep.job_id], flags, strict=True)) if bad
        ]
        if not slow:
            continue
        runs = groups.get(key_of[rep.job_id], [])
        culprits: dict[str, dict[str, Any]] = {}
        for c in sorted(by_victim.get(rep.job_id, []), key=lambda c: -c.delay_s):
            e = culprits.setdefault(
                c.culprit,
                {
                    "job_id": c.culprit,
                    "component": c.component,
                    "feature": c.feature,
                    "delay_s": 0.0,
                },
            )
            e["delay_s"] = round(e["delay_s"] + c.delay_s, 1)
        near = neighbours(diag.bursts, rep.job_id, [(p.start, p.end) for _, p in slow])
        rep.history = {
            "anomalous_phases": [
                {
                    "phase": i,
                    "start": phases._ts(p.start).isoformat() + "Z",
                    "duration_s": round(p.duration, 1),
                    "busy_s": round(p.busy_s, 1),
                    "bytes": p.nbytes,
                    "slowdown": _slowdown(p, runs, rep.job_id),
                    "slowdown_range": _slowdown(p, runs, rep.job_id, (75, 25)),
                }
                for i, p in slow
            ],
            "earlier_runs": sum(
                1 for r in runs if r.job_id != rep.job_id and r.start < rep.start.timestamp()
            ),
            "culprits": sorted(culprits.values(), key=lambda e: -e["delay_s"]),
            "neighbours": [n.to_dict() for n in near[:MAX_NEIGHBOURS]],
        }
