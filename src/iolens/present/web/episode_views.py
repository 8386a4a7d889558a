"""Anomaly episodes as the pages show them: a stable key per episode for its URL, the
list, one episode with its chart and the jobs on the component, and the episodes a job's
components saw while it ran; and who used a component over a period (`jobs_on`)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from iolens.present.web.charts import (
    component_series,
    epoch,
    latest_sample,
    naive_t,
    ts_window,
)
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
    jobs, note = jobs_on(store, component, e.get("component_kind"), e["start"], end)
    return {"episode": e, "chart": chart, "jobs": jobs, "jobs_note": note}


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
    return _only_own_jobs(store, rows, job.get("user"))


_TOKEN = re.compile(r"[\w.\-]+")


def _only_own_jobs(
    store: Store, rows: list[dict[str, Any]], owner: str | None
) -> list[dict[str, Any]]:
    """Summaries as the job's owner may read them: another user's job id becomes "another
    user's job" (a job page is its owner's; the admin pages keep every id)."""
    words = sorted({w for r in rows for w in _TOKEN.findall(r["summary"])})
    if not words:
        return rows
    foreign = {
        j["job_id"]
        for j in store.query(
            "SELECT job_id FROM jobs WHERE job_id IN (SELECT unnest(?)) "
            "AND user IS DISTINCT FROM ?",
            [words, owner],
        ).to_pylist()
    }
    if not foreign:
        return rows
    ids = "|".join(map(re.escape, sorted(foreign, key=len, reverse=True)))
    pattern = re.compile(r"(?:\bjob )?(?<![\w.\-])(?:" + ids + r")(?![\w.\-])")
    for r in rows:
        r["summary"] = pattern.sub("another user's job", r["summary"])
    return rows


def jobs_on(
    store: Store,
    component_id: str,
    kind: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int = 25,
) -> tuple[list[dict[str, Any]], str | None]:
    """Who moved the most through a component, and a note when that cannot be known.

    OSTs and MDTs count per job_stats id, which is a scheduler job or, for I/O outside any
    job, a process (`find.1003`: `iolens.model.ids`), listed as such. A forwarder counts
    per client node: its clients' requests go to the jobs on those nodes at the time.
    """
    from iolens.analyze.components.forwarding import CLIENT_KIND
    from iolens.analyze.jobids import job_scheme

    window, params = ts_window("s.ts", since or None, until or None)
    sums = (
        "sum(coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS bytes, "
        "sum(coalesce(s.md_ops, 0))::DOUBLE AS md_ops, min(s.ts) AS first, max(s.ts) AS last"
    )
    if kind == "forwarder":
        served = store.query(
            f"SELECT count(*) AS n FROM server_samples s WHERE s.kind = '{CLIENT_KIND}' "
            f"AND starts_with(s.component_id, ?){window}",
            [f"{component_id}:", *params],
        ).to_pylist()[0]["n"]
        if not served:
            return [], (
                f"{component_id} exports no per-client counters (an LNet router has none; a "
                "forwarding daemon's clients/<node>/stats give them), so which jobs it "
                "served is not known"
            )
        rows = store.query(
            f"""
            WITH j AS (SELECT job_id, "user", app, unnest(nodes) AS node, "start", "end"
                       FROM jobs)
            SELECT j.job_id, any_value(j."user") AS "user", any_value(j.app) AS app, {sums}
            FROM server_samples s JOIN j ON s.component_id = ? || ':' || j.node
            WHERE s.kind = '{CLIENT_KIND}' AND s.interval_s > 0 AND s.ts > j."start"
                  AND (j."end" IS NULL OR s.ts - to_microseconds(
                      CAST(s.interval_s * 1e6 AS BIGINT)) < j."end"){window}
            GROUP BY j.job_id ORDER BY bytes DESC, md_ops DESC, j.job_id LIMIT {int(limit)}
            """,
            [component_id, *params],
        ).to_pylist()
        return [{**r, "label": None} for r in rows], None
    rows = store.query(
        f"""
        SELECT s.job_id AS raw, {sums} FROM server_samples s
        WHERE s.component_id = ? AND s.job_id IS NOT NULL{window}
        GROUP BY s.job_id
        """,
        [component_id, *params],
    ).to_pylist()
    scheme = job_scheme(store)
    merged: dict[tuple[bool, str], dict[str, Any]] = {}
    for r in rows:
        tag = scheme.classify(r.pop("raw"))
        key = (tag.is_job, tag.job_id if tag.is_job and tag.job_id else tag.raw)
        got = merged.get(key)
        if got is None:
            merged[key] = {**r, "job_id": key[1], "label": None if tag.is_job else tag.label()}
            continue
        got["bytes"] += r["bytes"]
        got["md_ops"] += r["md_ops"]
        got["first"], got["last"] = min(got["first"], r["first"]), max(got["last"], r["last"])
    top = sorted(merged.values(), key=lambda r: (-r["bytes"], -r["md_ops"], r["job_id"]))
    top = top[:limit]
    ids = [r["job_id"] for r in top if r["label"] is None]
    who = {}
    if ids:
        marks = ", ".join("?" for _ in ids)
        who = {
            w["job_id"]: w
            for w in store.query(
                f'SELECT job_id, "user", app FROM jobs WHERE job_id IN ({marks})', ids
            ).to_pylist()
        }
    for r in top:
        w = who.get(r["job_id"], {})
        r["user"], r["app"] = w.get("user"), w.get("app")
    return top, None
