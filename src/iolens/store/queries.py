"""Named queries the analyses and presenters use, in plain DuckDB SQL.

Keeping SQL here (not in analyses) is the seam for other backends: a Parquet-dataset
store runs the same statements over views with the same table names.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa

from iolens.errors import NotFound
from iolens.store.base import Store


def job(store: Store, job_id: str) -> dict[str, Any]:
    rows = store.query("SELECT * FROM jobs WHERE job_id = ?", [job_id]).to_pylist()
    if not rows:
        raise NotFound(f"job {job_id} is not in {store.location}")
    return rows[0]


def jobs(store: Store, user: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Jobs with their cached summary figures (None where not analysed yet)."""
    sql = (
        "SELECT j.*, s.* EXCLUDE (job_id, analyzed) FROM jobs j "
        "LEFT JOIN job_summaries s USING (job_id)"
    )
    sql += ' WHERE "user" = ?' if user else ""
    sql += ' ORDER BY "start", job_id' + (f" LIMIT {int(limit)}" if limit else "")
    return store.query(sql, [user] if user else []).to_pylist()


def client_io(store: Store, job_id: str) -> pa.Table:
    return store.query(
        "SELECT node, pid, rank, op, file_id, size, count, stride, "
        "epoch_us(t_start) / 1e6 AS t0, epoch_us(t_end) / 1e6 AS t1 "
        "FROM client_io WHERE job_id = ?",
        [job_id],
    )


def layer_bytes(store: Store, job_id: str) -> dict[str, dict[str, int]]:
    """Bytes and metadata ops attributed to the job at each server layer."""
    rows = store.query(
        "SELECT kind, sum(read_bytes) AS r, sum(write_bytes) AS w, sum(md_ops) AS md "
        "FROM server_samples WHERE job_id = ? GROUP BY kind ORDER BY kind",
        [job_id],
    ).to_pylist()
    return {
        r["kind"]: {
            "read_bytes": int(r["r"] or 0),
            "write_bytes": int(r["w"] or 0),
            "md_ops": int(r["md"] or 0),
        }
        for r in rows
    }


def forwarders_of(store: Store, nodes: list[str]) -> list[str]:
    if not nodes:
        return []
    store.register("_iolens_nodes", pa.table({"node": nodes}))
    try:
        rows = (
            store.query(
                "SELECT DISTINCT forwarder FROM forwarding JOIN _iolens_nodes "
                "ON compute_node = node ORDER BY forwarder"
            )
            .column("forwarder")
            .to_pylist()
        )
    finally:
        store.unregister("_iolens_nodes")
    return rows


def file_layouts(store: Store, file_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Path and OSTs (empty when the layout is unknown) of each known file."""
    if not file_ids:
        return {}
    store.register("_iolens_fids", pa.table({"fid": pa.array(file_ids, pa.int64())}))
    try:
        rows = store.query(
            "SELECT file_id, path, osts FROM files JOIN _iolens_fids ON file_id = fid"
        ).to_pylist()
    finally:
        store.unregister("_iolens_fids")
    return {r["file_id"]: {"path": r["path"], "osts": r["osts"] or []} for r in rows}


def osts_with_job_samples(store: Store, job_id: str) -> list[str]:
    """OSTs whose jobstats name this job."""
    return (
        store.query(
            "SELECT DISTINCT component_id FROM server_samples WHERE job_id = ? AND kind = 'ost' "
            "ORDER BY component_id",
            [job_id],
        )
        .column("component_id")
        .to_pylist()
    )


def findings_for(store: Store, subject_kind: str, subject_id: str) -> list[dict[str, Any]]:
    rows = store.query(
        'SELECT code, name, severity, subject_kind, subject_id, "start", "end", evidence, '
        "recommendation FROM findings WHERE subject_kind = ? AND subject_id = ? "
        "ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, code",
        [subject_kind, subject_id],
    ).to_pylist()
    for r in rows:
        r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
        for k in ("start", "end"):
            r[k] = r[k].isoformat() + "Z" if r[k] else None
    return rows


_WIDE = (
    "read_bytes",
    "write_bytes",
    "read_ops",
    "write_ops",
    "md_ops",
    "wait_us",
    "service_us",
    "queue_len",
    "active_threads",
)


def series(
    store: Store,
    kind: str | None = None,
    component: str | None = None,
    metric: str | None = None,
    since: datetime | None = None,
    limit: int = 10_000,
) -> list[dict[str, Any]]:
    """Server-side samples in long form: the wide standard metrics and every agent metric."""
    unpivot = " UNION ALL ".join(
        f"SELECT ts, kind, component_id, job_id, '{m}' AS metric, {m}::DOUBLE AS value "
        f"FROM server_samples WHERE {m} IS NOT NULL"
        for m in _WIDE
    )
    where, params = ["job_id IS NULL"], []
    for col, val in (("kind", kind), ("component_id", component), ("metric", metric)):
        if val is not None:
            where.append(f"{col} = ?")
            params.append(val)
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    sql = (
        f"SELECT ts AS time, kind, component_id AS component, metric, value FROM ("
        f"{unpivot} UNION ALL SELECT ts, kind, component_id, job_id, metric, value "
        f"FROM metrics) WHERE {' AND '.join(where)} "
        f"ORDER BY time, kind, component, metric LIMIT {int(limit)}"
    )
    return store.query(sql, params).to_pylist()
