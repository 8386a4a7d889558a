"""Who is behind a raw jobstats id or a client NID, as the analyses need to know.

The store keeps job ids as Lustre printed them (`server_samples.job_id`: `12345`,
`find.1003`); `iolens.model.ids.JobIdScheme` says which are scheduler jobs. The site's
own `jobid_name` formats live in the store's `meta` table under `FORMATS_KEY`, so every
analysis (and `iolens serve`) reads the same scheme, and changing it re-reads history.

Names for what the ids carry come from real records only: a uid is a user name when a
Darshan log of a scheduler job recorded that uid (`darshan_logs.uid` with `jobs.user`);
a NID is a host when the site topology lists it as an alias (`component_aliases`, loaded
by `iolens site topology`). Without them the evidence keeps the bare uid and NID.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from iolens.errors import StoreError
from iolens.model.ids import NUMERIC_JOB, JobIdScheme
from iolens.store.base import Store

__all__ = ["FORMATS_KEY", "job_scheme", "nid_hosts", "save_job_scheme", "uid_users"]

#: `meta` key: JSON `{"formats": [...], "job_pattern": "...", "unknown_is_job": bool}`.
FORMATS_KEY = "lustre_jobid_formats"


def job_scheme(store: Store) -> JobIdScheme:
    """The site's scheme if one was saved, else the defaults."""
    try:
        rows = store.query("SELECT value FROM meta WHERE key = ?", [FORMATS_KEY]).to_pylist()
    except StoreError:  # a backend without `meta` (a Parquet dataset)
        rows = []
    if not rows:
        return JobIdScheme()
    cfg = json.loads(rows[0]["value"])
    return JobIdScheme(
        cfg.get("formats", ()),
        job_pattern=cfg.get("job_pattern") or NUMERIC_JOB,
        unknown_is_job=bool(cfg.get("unknown_is_job", True)),
    )


def save_job_scheme(
    store: Store,
    formats: Sequence[str],
    job_pattern: str = NUMERIC_JOB,
    unknown_is_job: bool = True,
) -> JobIdScheme:
    """Validate and store the site's Lustre `jobid_name` formats (see `JobIdScheme`)."""
    scheme = JobIdScheme(formats, job_pattern=job_pattern, unknown_is_job=unknown_is_job)
    value = {"formats": list(formats), "job_pattern": job_pattern, "unknown_is_job": unknown_is_job}
    store.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [FORMATS_KEY, json.dumps(value)])
    return scheme


def uid_users(store: Store) -> dict[int, str]:
    """uid -> user name, from Darshan logs of jobs whose owner the scheduler recorded.

    A uid seen with two names (accounts renamed, or a shared service uid) is left out."""
    try:
        rows = store.query(
            "SELECT d.uid, min(j.user) AS user, count(DISTINCT j.user) AS n "
            "FROM darshan_logs d JOIN jobs j USING (job_id) "
            "WHERE d.uid IS NOT NULL AND j.user IS NOT NULL GROUP BY d.uid"
        ).to_pylist()
    except StoreError:
        return {}
    return {int(r["uid"]): r["user"] for r in rows if r["n"] == 1}


def nid_hosts(store: Store) -> dict[str, str]:
    """Lustre NID (`172.20.20.6@o2ib`) -> host name, from the site topology's aliases."""
    try:
        rows = store.query("SELECT alias, component_id FROM component_aliases").to_pylist()
    except StoreError:  # no topology loaded with aliases (or an older schema)
        return {}
    return {r["alias"]: r["component_id"] for r in rows}
