"""Named queries the analyses and presenters use, in plain DuckDB SQL.

Keeping SQL here (not in analyses) is the seam for other backends: a Parquet-dataset
store runs the same statements over views with the same table names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from iolens.errors import NotFound
from iolens.model.rows import NAMES
from iolens.model.schema import UPPER_LAYERS, layer_level_sql
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


_KIND = "CASE WHEN {c}op IN ('read', 'write') THEN {c}op ELSE 'meta' END"
_UPPER_SQL = "(" + ", ".join(f"'{n}'" for n in UPPER_LAYERS) + ")"


def unanalyzed_jobs(store: Store) -> list[str]:
    """Jobs without a summary, or whose summary predates their end (a live analysis of
    the running job, partial): the ones a listing analyses first.

    Here rather than in the pipeline, so a listing with nothing to do does not import the
    analyses (scikit-learn and SciPy alone take most of a second to load).
    """
    sql = (
        "SELECT j.job_id FROM jobs j LEFT JOIN job_summaries s USING (job_id) "
        'WHERE s.job_id IS NULL OR (s.analyzed < j."end" AND j."end" <= ?) ORDER BY j.job_id'
    )
    now = datetime.now(UTC).replace(tzinfo=None)  # jobs' times are naive UTC
    todo = store.query(sql, [now]).column("job_id").to_pylist()
    failing = failing_jobs(store, todo)
    return [j for j in todo if j not in failing]


def refresh_traced_jobs(store: Store, job_ids: Iterable[str], state: str | None = None) -> None:
    """Recompute nodes, process count and run time of tracer-only jobs from their records.

    A trace ships one process at a time and its batch only adds a job nobody reported
    (`Batch.keep_known_jobs`), so a job known only from traces (no scheduler) keeps the
    first process's node, window and count until this widens it to all of them: the import
    command calls it once per run, the analysis before it reports on a job. Where `jobs`
    is not the analysis's to change (a scaled-out dataset: `read_only_tables`), the widened
    rows go to `traced_jobs`, through which that store's jobs view reads."""
    ids = pa.table({"job_id": pa.array(sorted(set(job_ids)), pa.string())})
    if ids.num_rows == 0:
        return
    store.register("_iolens_traced", ids)
    try:
        agg = store.query("""
            WITH traced AS (
                SELECT job_id, "start", "end" FROM jobs JOIN _iolens_traced USING (job_id)
                WHERE source = 'tracer'),
            spans AS (
                SELECT job_id, list(DISTINCT node ORDER BY node) AS nodes,
                       count(DISTINCT (node, pid))::INTEGER AS nprocs,
                       min(t_start) AS t0, max(t_end) AS t1
                FROM client_io JOIN traced USING (job_id) GROUP BY job_id)
            SELECT job_id, nodes, nprocs, least(t."start", t0) AS "start",
                   greatest(t."end", t1) AS "end"
            FROM spans JOIN traced AS t USING (job_id) ORDER BY job_id""")
    finally:
        store.unregister("_iolens_traced")
    if agg.num_rows == 0:
        return
    if "jobs" in getattr(store, "read_only_tables", ()):
        _widen_read_only_jobs(store, agg)
        return
    with store.transaction():
        for row in agg.to_pylist():
            store.execute(
                'UPDATE jobs SET nodes = ?, nprocs = ?, "start" = ?, "end" = ?, '
                "state = coalesce(?, state) WHERE job_id = ? AND source = 'tracer'",
                [row["nodes"], row["nprocs"], row["start"], row["end"], state, row["job_id"]],
            )


def _widen_read_only_jobs(store: Store, rows: pa.Table) -> None:
    """`rows` replace the jobs' earlier widened rows in `traced_jobs`."""
    store.register("_iolens_widened", rows)
    try:
        with store.transaction():
            store.execute(
                "DELETE FROM traced_jobs WHERE job_id IN (SELECT job_id FROM _iolens_widened)"
            )
            store.append("traced_jobs", rows)
    finally:
        store.unregister("_iolens_widened")


def data_stamps(store: Store, job_ids: list[str]) -> dict[str, str]:
    """What a job's analysis was computed from, in brief: its scheduler record (state,
    times, size) and how many client, server and Darshan rows it has. A new batch for the
    job changes it; nothing else does."""
    if not job_ids:
        return {}
    store.register("_iolens_stamped", pa.table({"job_id": pa.array(job_ids, pa.string())}))
    try:
        rows = store.query(
            """
            WITH k AS (SELECT DISTINCT job_id FROM _iolens_stamped),
            c AS (SELECT job_id, count(*) AS n FROM client_io SEMI JOIN k USING (job_id)
                  GROUP BY job_id),
            s AS (SELECT job_id, count(*) AS n FROM server_samples SEMI JOIN k USING (job_id)
                  GROUP BY job_id),
            d AS (SELECT job_id, count(*) AS n FROM darshan_logs SEMI JOIN k USING (job_id)
                  GROUP BY job_id)
            SELECT k.job_id, j.state, j."start", j."end", j.nprocs, len(j.nodes) AS nodes,
                   c.n AS client, s.n AS server, d.n AS darshan
            FROM k LEFT JOIN jobs j USING (job_id) LEFT JOIN c USING (job_id)
                   LEFT JOIN s USING (job_id) LEFT JOIN d USING (job_id)
            """
        ).to_pylist()
    finally:
        store.unregister("_iolens_stamped")
    return {r.pop("job_id"): json.dumps(r, default=str, sort_keys=True) for r in rows}


def failing_jobs(store: Store, job_ids: list[str]) -> set[str]:
    """Of `job_ids`, those whose analysis failed on the data they have now: reads leave
    them alone (the failure is shown) until a batch for them lands."""
    if not job_ids:
        return set()
    failed = store.query(
        "SELECT job_id, any_value(data_stamp) AS stamp FROM analysis_errors "
        "WHERE analysis IN ('report', 'diagnosis') AND job_id IN (SELECT unnest(?)) "
        "GROUP BY job_id",
        [job_ids],
    ).to_pylist()
    if not failed:
        return set()
    now = data_stamps(store, [r["job_id"] for r in failed])
    return {r["job_id"] for r in failed if now.get(r["job_id"]) == r["stamp"]}


def analysis_errors(store: Store, job_id: str) -> list[dict[str, Any]]:
    """The analyses that failed on this job at its last analysis (`views.job` shows them)."""
    return store.query(
        "SELECT analysis, error, iolens_version, failed_at FROM analysis_errors "
        "WHERE job_id = ? ORDER BY analysis",
        [job_id],
    ).to_pylist()


def counted_layer_ctes(jobs: str) -> str:
    """CTEs ending in `upper_counted(job_id, file_id, k, lv)`: the jobs' files whose reads
    (k = 'read'), writes ('write') or metadata ops ('meta') are counted at an upper layer
    level `lv` (LAYER_LEVELS: 1 MPI-IO, 2 HDF5/PnetCDF); every other (job, file, kind) is
    counted at level 0, the POSIX/STDIO layer.

    An MPI-IO or HDF5 call and the calls of the layers below it that the library makes for
    it describe the same I/O, so each (job, file, kind) is counted from one level only:
    metadata from the lowest level that has any; data from the level that moved the most
    bytes, the lowest on a tie, so the lower one unless an upper one moved more (the
    library went around the wrappers below, e.g. with POSIX AIO for nonblocking and
    split-collective MPI-IO). `jobs` is a relation with a job_id column.
    """
    kind = _KIND.format(c="c.")
    return f"""
u AS (
  SELECT DISTINCT job_id, file_id
  FROM client_io JOIN {jobs} USING (job_id) WHERE layer IN {_UPPER_SQL}),
lv AS (
  SELECT c.job_id, c.file_id, {kind} AS k, {layer_level_sql("c.layer")} AS lv,
         sum(c.size * c.count) AS b
  FROM client_io c JOIN {jobs} USING (job_id) SEMI JOIN u USING (job_id, file_id)
  GROUP BY ALL),
upper_counted AS (
  SELECT job_id, file_id, k, lv FROM lv
  QUALIFY row_number() OVER (
    PARTITION BY job_id, file_id, k
    ORDER BY CASE WHEN k = 'meta' THEN 0 ELSE -b END, lv) = 1 AND lv > 0)"""


def counted_sql(alias: str = "c") -> tuple[str, str]:
    """(join, condition) that keep the rows of client_io `alias` counted per
    counted_layer_ctes()."""
    join = (
        f"LEFT JOIN upper_counted uc ON uc.job_id = {alias}.job_id "
        f"AND uc.file_id = {alias}.file_id AND uc.k = {_KIND.format(c=alias + '.')}"
    )
    return join, f"({layer_level_sql(alias + '.layer')} = coalesce(uc.lv, 0))"


def client_io(store: Store, job_id: str) -> pa.Table:
    """The job's client records, each I/O once (see counted_layer_ctes)."""
    join, counted = counted_sql()
    return store.query(
        f"WITH one AS (SELECT $1::VARCHAR AS job_id), {counted_layer_ctes('one')} "
        "SELECT c.node, c.pid, c.rank, c.op, c.file_id, c.size, c.count, c.stride, "
        "epoch_us(c.t_start) / 1e6 AS t0, epoch_us(c.t_end) / 1e6 AS t1 "
        f"FROM client_io c {join} WHERE c.job_id = $1 AND {counted}",
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


#: Up to this many file ids are looked up with a literal IN list, which DuckDB pushes into
#: the scan (through the dataset's newest-row-per-file window: 1.06 s -> 0.3 s on the
#: 40,960-node hour's 6 M file rows); more are joined.
INLINE_IDS = 2048


def file_layouts(store: Store, file_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Path and OSTs (empty when the layout is unknown) of each known file."""
    if not file_ids:
        return {}
    if len(file_ids) <= INLINE_IDS:
        ids = ", ".join(str(int(f)) for f in file_ids)  # ints only: nothing to escape
        rows = store.query(f"SELECT file_id, path, osts FROM files WHERE file_id IN ({ids})")
    else:
        store.register("_iolens_fids", pa.table({"fid": pa.array(file_ids, pa.int64())}))
        try:
            rows = store.query(
                "SELECT file_id, path, osts FROM files JOIN _iolens_fids ON file_id = fid"
            )
        finally:
            store.unregister("_iolens_fids")
    return {r["file_id"]: {"path": r["path"], "osts": r["osts"] or []} for r in rows.to_pylist()}


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
        "ORDER BY TRY_CAST(json_extract_string(gain, '$.seconds') AS DOUBLE) DESC NULLS LAST, "
        "CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, code",
        [subject_kind, subject_id],
    ).to_pylist()
    for r in rows:
        r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
        for k in ("start", "end"):
            r[k] = r[k].isoformat() + "Z" if r[k] else None
    return rows


_WIDE = [m for m in NAMES["server_samples"][5:] if m != "source"]  # the measures


def series(
    store: Store,
    kind: str | None = None,
    component: str | None = None,
    metric: str | None = None,
    since: datetime | None = None,
    limit: int = 10_000,
) -> list[dict[str, Any]]:
    """Server-side samples in long form: the wide standard metrics and every agent metric.

    One value per (time, kind, component, metric). An agent writes each standard reading
    twice, to `server_samples` (the amount in the interval) and to `metrics` (its rate):
    the wide value is kept, as `data-model.md` defines it, and the rate is left out.
    """
    where, params = ["job_id IS NULL"], []
    for col, val in (("kind", kind), ("component_id", component), ("metric", metric)):
        if val is not None:
            where.append(f"{col} = ?")
            params.append(val)
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    cond = " AND ".join(where)
    unpivot = " UNION ALL ".join(
        f"SELECT ts, kind, component_id, job_id, '{m}' AS metric, {m}::DOUBLE AS value "
        f"FROM server_samples WHERE {m} IS NOT NULL"
        for m in _WIDE
    )
    sql = f"""
        WITH wide AS (SELECT ts, kind, component_id, metric, value FROM ({unpivot}) WHERE {cond}),
        long AS (SELECT ts, kind, component_id, metric, value FROM metrics WHERE {cond})
        SELECT ts AS time, kind, component_id AS component, metric, value FROM (
            SELECT * FROM wide
            UNION ALL SELECT * FROM long ANTI JOIN wide USING (ts, kind, component_id, metric))
        ORDER BY time, kind, component, metric, value LIMIT {int(limit)}
    """
    return store.query(sql, [*params, *params]).to_pylist()
