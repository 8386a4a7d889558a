"""Anomaly episodes as the pages show them: a stable key per episode for its URL, the
list, one episode with its chart and the jobs on the component, and the episodes a job's
components saw while it ran."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from iolens.present.web.charts import component_series, epoch, latest_sample, naive_t
from iolens.store.base import Store


def episode_key(kind: str, component: str, start: datetime) -> str:
    return f"{kind}~{component}~{start:%Y%m%dT%H%M%S}"


def parse_episode_key(key: str) -> tuple[str, str, datetime] | None:
    parts = key.split("~")
    if len(parts) != 3:
        return None
    try:
        return parts[0], parts[1], datetime.strptime(parts[2], "%Y%m%dT%H%M%S")
    except ValueError:
        return None


def episodes(store: Store, kind: str | None = None) -> list[dict[str, Any]]:
    from iolens.present.cli.diagnosis import episode_rows

    rows = episode_rows(store, kind=kind)
    for r in rows:
        r["key"] = episode_key(r["kind"], r["component"], r["start"])
    rows.sort(key=lambda r: r["start"], reverse=True)
    return rows


def episode_detail(store: Store, key: str) -> dict[str, Any] | None:
    parsed = parse_episode_key(key)
    if parsed is None:
        return None
    kind, component, start = parsed
    match = [
        e
        for e in episodes(store, kind)
        if e["component"] == component and e["start"].replace(microsecond=0) == start
    ]
    if not match:
        return None
    e = match[0]
    end = e["end"] or latest_sample(store) or e["start"]
    pad = max(timedelta(minutes=15), (end - e["start"]) / 2)
    chart = component_series(
        store, component, e["start"] - pad, end + pad, bands=[[epoch(e["start"]), epoch(end), True]]
    )
    jobs = store.query(
        """
        SELECT s.job_id, any_value(j."user") AS "user", any_value(j.app) AS app,
               sum(coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS bytes,
               sum(coalesce(s.md_ops, 0))::DOUBLE AS md_ops
        FROM server_samples s LEFT JOIN jobs j USING (job_id)
        WHERE s.component_id = ? AND s.job_id IS NOT NULL AND s.ts > ? AND s.ts <= ?
        GROUP BY s.job_id ORDER BY bytes DESC, md_ops DESC LIMIT 25
        """,
        [component, e["start"], end],
    ).to_pylist()
    return {"episode": e, "chart": chart, "jobs": jobs}


def episodes_during(
    store: Store, components: list[str], job: dict[str, Any]
) -> list[dict[str, Any]]:
    """Anomaly episodes on the job's components that overlapped its run."""
    if not components:
        return []
    start, end = job.get("start"), job.get("end")
    rows = store.query(
        'SELECT kind, component_kind, component_id, "start", "end", severity, evidence '
        "FROM anomalies WHERE component_id IN (SELECT unnest(?)) "
        'AND (? IS NULL OR "end" IS NULL OR "end" > ?) AND (? IS NULL OR "start" < ?) '
        'ORDER BY "start"',
        [components, naive_t(start), naive_t(start), naive_t(end), naive_t(end)],
    ).to_pylist()
    for r in rows:
        ev = json.loads(r.pop("evidence") or "{}")
        r["summary"] = ev.get("summary", "")
        r["key"] = episode_key(r["kind"], r["component_id"], r["start"])
    return rows
