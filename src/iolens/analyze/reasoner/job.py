"""A stored job through the reasoner: its traced activities from `client_io`, and the
server-side anomaly episodes (`anomalies`, found by `iolens.analyze.components`) of its
run, to correlate with."""

from __future__ import annotations

import json
from typing import Any

from iolens.analyze.reasoner import ReasonerConfig, reason
from iolens.analyze.reasoner.activity import Activity, from_table
from iolens.store.base import Store


def activities(store: Store, job_id: str) -> list[Activity]:
    """The job's client records as activities, in start order."""
    rows = store.query(
        "SELECT c.*, f.path FROM client_io c LEFT JOIN files f USING (file_id) "
        "WHERE c.job_id = ? ORDER BY c.t_start, c.t_end",
        [job_id],
    )
    paths = {
        i: p
        for i, p in zip(
            rows.column("file_id").to_pylist(), rows.column("path").to_pylist(), strict=True
        )
        if i is not None and p is not None
    }
    return from_table(rows, paths)


def server_anomalies(store: Store, acts: list[Activity]) -> list[dict[str, Any]]:
    """Stored component anomaly episodes overlapping the activities' span."""
    if not acts:
        return []
    start, end = min(a.t_start for a in acts), max(a.t_end for a in acts)
    rows = store.query(
        'SELECT kind, component_kind, component_id, "start", "end", severity, evidence '
        'FROM anomalies WHERE "start" <= ? AND ("end" IS NULL OR "end" >= ?) ORDER BY "start"',
        [end, start],
    ).to_pylist()
    for r in rows:
        try:
            r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
        except ValueError:
            r["evidence"] = {"raw": r["evidence"]}
    return rows


def reason_job(store: Store, job_id: str, cfg: ReasonerConfig | None = None) -> dict[str, Any]:
    """{job_id, activities, processes, nodes, anomalies} for a stored job."""
    acts = activities(store, job_id)
    return {
        "job_id": job_id,
        "activities": len(acts),
        "processes": len({a.process for a in acts}),
        "nodes": len({a.node for a in acts}),
        "anomalies": reason(acts, cfg, server_anomalies(store, acts)),
    }
