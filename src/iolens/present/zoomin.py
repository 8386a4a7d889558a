"""The zoom-in analysis across jobs (Wang et al., CCGrid'19), for `iolens zoomin`.

One factor row per job (Table I: data size, processes, metadata share, request sizes,
rank and OST balance, and the file-system weather before the job), from Darshan logs
read now or from a store's imported jobs, and the paper's two wide views over them:
the platform view (how each factor correlates with bandwidth, `platform.correlation`) and
the application view (jobs grouped by executable and user, `platform.application_view`).
Each row also names the zoom-in root causes (Z01-Z10) found for that job.

Weather comes from the store's server data (LMT databases imported with `iolens import
lmt`, or live Lustre and node agents). A stored job's row was computed when its log was
imported; when its weather is empty there and the store now has server data for that
time (LMT imported after the logs), it is computed now, so the order of imports does not
matter. Logs read without a store have no weather.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iolens.errors import InputError

if TYPE_CHECKING:
    from iolens.store.base import Store

#: The weather factors (13-15), filled from the store's server data.
WEATHER = ("oss_cpu_pct", "mds_cpu_pct", "ost_io_mb")


def rows_from_logs(
    paths: Sequence[Path], store: Store | None = None
) -> tuple[list[dict[str, Any]], list[InputError]]:
    """A factor row per readable log (with `log` and `causes`), and the logs that failed.

    With a store, each log is analysed as `iolens import darshan` analyses it (the
    scheduler's nodes and user, the weather before it); without, from the log alone."""
    from iolens.analyze.darshan import RuleContext, analyze_log, site_context
    from iolens.analyze.darshan.zoomin import diagnose_zoomin, zoom
    from iolens.present.darshan_logs import read

    site = site_context(store) if store is not None else None
    rows: list[dict[str, Any]] = []
    failed: list[InputError] = []
    for path in paths:
        try:
            job = read(path)
        except InputError as exc:
            failed.append(exc)
            continue
        if store is not None:
            found, row = analyze_log(store, job, site)
            row.pop("computed", None)
        else:
            ctx = RuleContext()
            found = diagnose_zoomin(job, ctx)
            row = dict(zoom(job, ctx).factors)  # user: the uid; app: the executable's name
        row["log"] = str(path)
        row["causes"] = sorted({f.code for f in found if f.code.startswith("Z")})
        rows.append(row)
    return rows, failed


def rows_from_store(store: Store, job_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The stored factor rows (of `job_ids`, default all), weather filled where it was
    empty and the store has server data now, with each job's zoom-in causes."""
    from iolens.analyze.darshan.zoomin import job_weather

    where, args = "", []
    if job_ids:
        where, args = f"WHERE job_id IN ({', '.join('?' * len(job_ids))})", list(job_ids)
    rows = store.query(f"SELECT * FROM job_factors {where} ORDER BY job_id", args).to_pylist()
    if job_ids:
        missing = sorted(set(job_ids) - {r["job_id"] for r in rows})
        if missing:
            raise InputError(", ".join(missing), "no zoom-in factors: not an imported Darshan job")
    causes = {
        r["subject_id"]: r["codes"]
        for r in store.query(
            "SELECT subject_id, list(DISTINCT code ORDER BY code) AS codes FROM findings "
            "WHERE subject_kind = 'job' AND code LIKE 'Z%' GROUP BY subject_id"
        ).to_pylist()
    }
    has_server_data = bool(
        store.query(
            "SELECT 1 FROM server_samples WHERE kind = 'ost' AND job_id IS NULL LIMIT 1"
        ).num_rows
        or store.query("SELECT 1 FROM metrics WHERE kind IN ('oss', 'mds') LIMIT 1").num_rows
    )
    for r in rows:
        r.pop("computed", None)
        if has_server_data and all(r.get(k) is None for k in WEATHER):
            w = job_weather(store, r["job_id"]) or {}
            r.update({k: w.get(k) for k in WEATHER})
        r["causes"] = list(causes.get(r["job_id"]) or [])
    return rows


def view(rows: list[dict[str, Any]], app: str | None = None) -> dict[str, Any]:
    """The rows and the paper's platform and application views over them."""
    from iolens.analyze.darshan.zoomin.platform import application_view, correlation

    if app is not None:
        rows = [r for r in rows if r.get("app") == app]
    platform = correlation(rows) if rows else None
    return {
        "jobs": rows,
        "platform": platform,
        "bandwidth_correlation": _with_bandwidth(platform) if platform else [],
        "applications": application_view(rows) if rows else [],
    }


def _with_bandwidth(platform: dict[str, Any]) -> list[dict[str, Any]]:
    """Each factor's Pearson coefficient with bandwidth and the jobs it rests on."""
    cols = platform["columns"]
    b = cols.index("bandwidth")
    return [
        {"factor": c, "r": platform["matrix"][i][b], "jobs": platform["pairs"][i][b]}
        for i, c in enumerate(cols)
        if c != "bandwidth"
    ]
