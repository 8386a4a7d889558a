"""Imported Darshan jobs diagnosed again when the store learns what they lacked.

A log is diagnosed when it is imported, with the server data the store has then. LMT
databases often arrive later (a site exports them by the month), and the zoom-in
weather factors (OSS/MDS CPU, OST traffic before the job) and the findings that read
them (Z08, Z09) were computed without. `stale_weather` finds the jobs whose factors have
no weather while the store now has server data before their start; `rediagnose`
re-runs the Darshan rules on their stored logs and replaces their findings and factors,
so the order of imports does not change what a user is told.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from iolens.analyze.darshan import CODES, analyze_log, chains, site_context
from iolens.analyze.darshan.zoomin import factors_table, job_weather
from iolens.model.finding import Finding, findings_table
from iolens.store.base import Store
from iolens.store.darshan import load_jobs

#: the weather factors (13-15) of a job_factors row
WEATHER = ("oss_cpu_pct", "mds_cpu_pct", "ost_io_mb")
#: how far from the new samples' span a job can start and still see them in its weather
LATEST_SAMPLE = timedelta(minutes=10)


def stale_weather(
    store: Store, since: datetime | None = None, until: datetime | None = None
) -> list[str]:
    """Jobs whose stored factors have no weather although the store now has some; with
    `since`/`until` (the span of newly loaded server data), only jobs starting then."""
    empty = " AND ".join(f"f.{k} IS NULL" for k in WEATHER)
    where, args = [empty], []
    if since is not None:
        where.append("l.t >= ?")
        args.append(since - LATEST_SAMPLE)
    if until is not None:  # a sample covers the interval before its time stamp
        where.append("l.t <= ?")
        args.append(until + LATEST_SAMPLE)
    ids = store.query(
        'SELECT job_id FROM job_factors f JOIN (SELECT job_id, min("start") AS t '
        "FROM darshan_logs GROUP BY job_id) l USING (job_id) "
        f"WHERE {' AND '.join(where)} ORDER BY job_id",
        args,
    )
    return [j for j in ids.column("job_id").to_pylist() if job_weather(store, j)]


def rediagnose(store: Store, job_ids: list[str]) -> int:
    """Diagnose the jobs' stored logs again; their Darshan findings and factors row are
    replaced (the import's merge of a job's logs included). Returns the jobs done."""
    site = site_context(store)
    done = 0
    for job_id in job_ids:
        found: list[Finding] = []
        row = None
        for log in load_jobs(store, job_id):
            mine, row = analyze_log(store, log, site)
            found += mine
        if row is None:
            continue
        merged = chains.merged(found)
        row["computed"] = datetime.now(UTC).replace(tzinfo=None)
        with store.transaction():
            store.execute(
                "DELETE FROM findings WHERE subject_kind = 'job' AND subject_id = ? "
                "AND code IN (SELECT unnest(?))",
                [job_id, sorted(CODES)],
            )
            store.execute("DELETE FROM job_factors WHERE job_id = ?", [job_id])
            if merged:
                store.append("findings", findings_table(merged))
            store.append("job_factors", factors_table([row]))
        done += 1
    return done
