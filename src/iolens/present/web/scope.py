"""What a caller may see: their own jobs, and servers only through their jobs.

Users see jobs whose `jobs.user` is their name, and a server component (forwarder, OST,
MDS) only if one of those jobs went through it, only for that job's run (plus a minute
either side) — what Beacon allowed its users. Admins see everything. Another user's job
is reported exactly like a job that does not exist (`JobHidden`, same text), so ids cannot
be probed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from iolens.errors import NotFound
from iolens.present.web.auth import Principal
from iolens.store.base import Store

#: Slack around a job's run when a user looks at a server component through it.
WINDOW_SLACK = timedelta(seconds=60)

SORTABLE = {
    "job_id": "j.job_id",
    "user": 'j."user"',
    "app": "j.app",
    "start": 'j."start"',
    "end": 'j."end"',
    "state": "j.state",
    "io_mode": "s.io_mode",
    "nodes": "len(j.nodes)",
    "nprocs": "j.nprocs",
    "read_bytes": "s.read_bytes",
    "write_bytes": "s.write_bytes",
    "bytes": "coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0)",
    "read_bw_avg": "s.read_bw_avg",
    "write_bw_avg": "s.write_bw_avg",
    "md_ops": "s.md_ops",
    "findings": "s.findings",
}


class JobHidden(NotFound):
    """The one error for an unknown job and for someone else's: the same words. The app
    answers it (404: JSON under /api, the error page elsewhere), so routes just raise it."""

    def __init__(self, job_id: str, store: Store) -> None:
        super().__init__(f"job {job_id} is not in {store.location}")
        self.job_id = job_id


def visible_job(store: Store, who: Principal, job_id: str) -> dict[str, Any]:
    """The job's scheduler row if the caller may see it; NotFound otherwise."""
    rows = store.query("SELECT * FROM jobs WHERE job_id = ?", [job_id]).to_pylist()
    if not rows or not (who.admin or rows[0]["user"] == who.name):
        raise JobHidden(job_id, store)
    return rows[0]


def owners(store: Store, job_ids: list[str]) -> dict[str, str]:
    if not job_ids:
        return {}
    rows = store.query(
        'SELECT job_id, "user" FROM jobs WHERE job_id IN (SELECT unnest(?))', [job_ids]
    ).to_pylist()
    return {r["job_id"]: r["user"] for r in rows}


def list_jobs(
    store: Store,
    who: Principal,
    *,
    q: str | None = None,
    user: str | None = None,
    app: str | None = None,
    state: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    sort: str = "start",
    order: str = "desc",
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """(one page of the caller's jobs as `iolens jobs --json` entries, how many match)."""
    where, params = ["true"], []
    if not who.admin:
        where.append('j."user" = ?')
        params.append(who.name)
    elif user:
        where.append('j."user" = ?')
        params.append(user)
    if q:
        where.append('(j.job_id ILIKE ? OR j.app ILIKE ? OR j."user" ILIKE ?)')
        params += [f"%{q}%"] * 3
    if app:
        where.append("j.app = ?")
        params.append(app)
    if state:
        where.append("j.state = ?")
        params.append(state.upper())
    if since:
        where.append('coalesce(j."end", j."start") >= ?')
        params.append(since)
    if until:
        where.append('j."start" < ?')
        params.append(until)
    col = SORTABLE.get(sort, 'j."start"')
    direction = "ASC" if order == "asc" else "DESC"
    rows = store.query(
        f"""
        SELECT j.job_id, j."user", j.app, j."start", j."end", j.state, s.io_mode,
               len(j.nodes) AS nodes, j.nprocs, s.read_bytes, s.write_bytes, s.read_bw_avg,
               s.write_bw_avg, s.md_ops, s.findings, count(*) OVER () AS total
        FROM jobs j LEFT JOIN job_summaries s USING (job_id)
        WHERE {" AND ".join(where)}
        ORDER BY {col} {direction} NULLS LAST, j.job_id {direction}
        LIMIT {int(limit)} OFFSET {int(offset)}
        """,
        params,
    ).to_pylist()
    total = int(rows[0]["total"]) if rows else 0
    for r in rows:
        r.pop("total")
        r["nodes"] = int(r["nodes"] or 0)
    return rows, total


def facets(store: Store, who: Principal) -> dict[str, list[str]]:
    """Values for the filters: the caller's apps, states and (admins) users."""
    where, params = ("", []) if who.admin else (' WHERE "user" = ?', [who.name])
    out: dict[str, list[str]] = {}
    for col in ("app", "state", "user"):
        if col == "user" and not who.admin:
            continue
        rows = store.query(
            f'SELECT DISTINCT "{col}" AS v FROM jobs{where} ORDER BY v', params
        ).to_pylist()
        out[col] = [r["v"] for r in rows if r["v"] is not None]
    return out


def job_window(job: dict[str, Any], now: datetime | None = None) -> tuple[datetime, datetime]:
    """The run of a job with the slack a user may look around it."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    start = job["start"] or now
    end = job["end"] or now
    return start - WINDOW_SLACK, end + WINDOW_SLACK


def job_components(store: Store, job_id: str) -> dict[str, list[str]]:
    """The servers the job's I/O went through (`crosslayer.path`), by kind."""
    from iolens.analyze.jobs.crosslayer import path

    p = path(store, job_id)
    return {"forwarder": p["forwarders"], "ost": p["osts"], "mds": p["mds"]}


def component_in_job(store: Store, job_id: str, component_id: str) -> str | None:
    """The kind of `component_id` if the job used it, else None."""
    for kind, ids in job_components(store, job_id).items():
        if component_id in ids:
            return kind
    return None
