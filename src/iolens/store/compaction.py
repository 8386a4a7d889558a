"""Compaction, second-pass compression, retention and downsampling of a dataset.

`iolens compact` (periodically, on one node: the "dedicated Beacon server" of the paper)
rewrites settled partitions:

* **merge**: every segment of an hour's partition of the timed tables (server samples,
  metrics) from all groups becomes one file sorted by component and time; the untimed
  tables (jobs, files, topology, batch keys) one file per group and day;
* **second pass** (Beacon 3.2 and Appendix A) on client records: the records of one job
  with the same feature vector - time (same second of start and end), operation, layer,
  request size, stride and count - on all its nodes and ranks become one row that keeps,
  per member, its node, rank, pid, offset, file, and the exact times and durations as
  deltas (lists, null when all members agree). Nothing is lost: the `client_io` view
  expands them back, row for row. The file is a per-member attribute, as Beacon's file
  descriptor is: ranks writing one file each (N-N) merge just as ranks sharing one (N-1);
* **retention**: server samples and metrics older than `full_days` are downsampled to
  `downsample_s` (sums of deltas, request-weighted latencies, time-weighted queue and
  threads, the brw_stats I/O time weighted by its I/Os: the per-minute series the
  component detectors use are unchanged); timed data older than `keep_days` (if set) is
  dropped.

Every rewrite is a compaction manifest (`_compactions/<id>.json`: inputs -> outputs)
written before its outputs are renamed into place; readers then ignore the inputs, which
are deleted by a later run once `grace_s` has passed.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from iolens.errors import StoreError
from iolens.model.schema import MERGED_BY_KEY, TABLES
from iolens.store.dataset_layout import (
    COMPACTED,
    MERGED,
    FileLock,
    Part,
    atomic_write,
    fsync_dir,
    init_dataset,
    new_id,
    part_of,
)
from iolens.store.segment_views import columns_sql, files_sql, merged_by_key_sql, view_sql
from iolens.store.site_config import RetentionSection
from iolens.store.visibility import Manifest, take_snapshot

#: Untimed tables: merged per group and day (they are never pruned by time).
UNTIMED = ("jobs", *MERGED_BY_KEY, "ingested")
#: First-pass records a second-pass row group holds, about (see `member_groups`).
MEMBERS_PER_ROW_GROUP = 1 << 20
#: Sort order of compacted files: row groups then prune well on these columns.
SORT = {
    "server_samples": "kind, component_id, ts",
    "metrics": "kind, component_id, metric, ts",
    MERGED: "job_id, t_start",
    "client_io": "job_id, node, rank, t_start",
    "jobs": "job_id",
    "files": "file_id",
    "ingested": "key",
}
_ORDER = 'node, rank, pid, file_id, "offset", t_start, t_end, dur_ns'


def second_pass_sql(source: str) -> str:
    """SELECT merging first-pass client records of `source` (a FROM clause) losslessly."""
    key = (
        "job_id, layer, op, size, stride, count, "
        "epoch_us(t_start) // 1000000, epoch_us(t_end) // 1000000"
    )
    return f"""
WITH r AS (
  SELECT *, {
        key.replace("epoch_us(t_start) // 1000000", "epoch_us(t_start) // 1000000 AS s0")
        .replace("epoch_us(t_end) // 1000000", "epoch_us(t_end) // 1000000 AS s1")
        .replace("job_id, layer, op, size, stride, count, ", "")
    },
    epoch_us(t_start) - min(epoch_us(t_start)) OVER w AS dts,
    epoch_us(t_end) - min(epoch_us(t_end)) OVER w AS dte
  FROM {source}
  WINDOW w AS (PARTITION BY {key})),
g AS (
  SELECT job_id, layer, op, size, stride, count,
    count(*)::INTEGER AS members,
    list(node ORDER BY {_ORDER}) AS nodes,
    list(rank ORDER BY {_ORDER}) AS ranks,
    list(pid ORDER BY {_ORDER}) AS pids,
    list("offset" ORDER BY {_ORDER}) AS offsets,
    min(file_id) AS file_id,
    list(file_id ORDER BY {_ORDER}) AS file_ids,
    count(DISTINCT file_id) = 1 AND count(file_id) = count(*) AS one_file,
    min(t_start) AS t_start, list(dts ORDER BY {_ORDER}) AS dt_start, max(dts) = 0 AS one_ts,
    min(t_end) AS t_end, list(dte ORDER BY {_ORDER}) AS dt_end, max(dte) = 0 AS one_te,
    min(dur_ns) AS dur_ns, list(dur_ns ORDER BY {_ORDER}) AS durs,
    count(DISTINCT dur_ns) = 1 AND count(dur_ns) = count(*) AS one_dur
  FROM r
  GROUP BY job_id, layer, op, size, stride, count, s0, s1)
SELECT job_id, layer, op, size, stride, count, members, nodes, ranks, pids, offsets,
  file_id, CASE WHEN one_file THEN NULL ELSE file_ids END AS file_ids,
  t_start, CASE WHEN one_ts THEN NULL ELSE dt_start END AS dt_start,
  t_end, CASE WHEN one_te THEN NULL ELSE dt_end END AS dt_end,
  dur_ns, CASE WHEN one_dur THEN NULL ELSE durs END AS durs
FROM g
"""


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Writer options for client records. Second-pass rows (lists per member) get delta
    encodings for integers and times (arithmetic rank, pid and offset lists cost almost
    nothing) and dictionaries for names and file ids; first-pass rows, sorted by job, node
    and rank, compress best with plain dictionaries (measured on the simulator's mix)."""
    opts: dict[str, Any] = {"compression": "zstd", "row_group_size": 122_880}
    if "members" not in schema.names:
        return opts
    dictionary: list[str] = []
    encoding: dict[str, str] = {}

    def walk(name: str, typ: pa.DataType, base: str) -> None:
        if pa.types.is_list(typ):
            walk(f"{name}.list.element", typ.value_type, base)
        elif pa.types.is_string(typ) or base in ("file_id", "file_ids"):
            dictionary.append(name)
        elif pa.types.is_integer(typ) or pa.types.is_timestamp(typ):
            encoding[name] = "DELTA_BINARY_PACKED"

    for f in schema:
        walk(f.name, f.type, f.name)
    return {**opts, "use_dictionary": dictionary, "column_encoding": encoding}


def write_client_records(table: pa.Table, path: Path) -> int:
    """Write first- or second-pass client records with `parquet_options`; bytes written."""
    pq.write_table(table, path, **parquet_options(table.schema))
    return path.stat().st_size


def stream_client_records(con: duckdb.DuckDBPyConnection, sql: str, path: Path) -> int:
    """`write_client_records` for a query's result, a batch at a time (an hour of a big
    machine's first-pass records does not fit in memory twice)."""
    rel = con.sql(sql)
    reader = (getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch)(122_880)
    opts = parquet_options(reader.schema)
    size = opts.pop("row_group_size")
    merged = "members" in reader.schema.names
    with pq.ParquetWriter(path, reader.schema, **opts) as w:
        for batch in reader:
            for a, b in member_groups(batch) if merged else [(0, batch.num_rows)]:
                w.write_batch(batch.slice(a, b - a), row_group_size=size)
    return path.stat().st_size


def member_groups(batch: pa.RecordBatch) -> list[tuple[int, int]]:
    """Row ranges of second-pass rows holding about MEMBERS_PER_ROW_GROUP members each.

    A second-pass row stands for up to thousands of first-pass records, so 122,880 rows
    made one row group of a whole hour: a job's query then decoded every job's lists. Cut
    by members, the row groups of a file sorted by job span few jobs each, and DuckDB skips
    the others by their job_id statistics (a job's records: 0.22 s -> 0.04 s on the
    40,960-node hour, for 6.5 % more bytes).
    """
    ends = np.cumsum(batch.column("members").to_numpy(zero_copy_only=False))
    if len(ends) == 0:
        return []
    cuts = np.searchsorted(ends, np.arange(MEMBERS_PER_ROW_GROUP, ends[-1], MEMBERS_PER_ROW_GROUP))
    edges = [0, *sorted({int(c) + 1 for c in cuts if c + 1 < len(ends)}), len(ends)]
    return list(pairwise(edges))


#: Means in `metrics` whose events other metrics of the same sample count (by name
#: prefix): the brw_stats `I/O time` mean over its histogram's buckets (the names of
#: `collect.sources.lustre_oss`, which this layer may not import; a test checks them).
#: Downsampled, such a mean is weighted by its events, so a minute's mean per I/O stays
#: what it was; other means are weighted by time.
MEAN_EVENTS = {"brw_io_time_us": "brw_io_time_ms_"}


def downsample_sql(table: str, source: str, seconds: int) -> str:
    """SELECT aggregating `source` rows of server samples or metrics to `seconds`."""
    step = seconds * 1_000_000
    bucket = f"(epoch_us(ts) - 1) // {step}"
    if table == "metrics":
        return _downsample_metrics_sql(source, bucket)
    reqs = "(coalesce(read_ops, 0) + coalesce(write_ops, 0) + coalesce(md_ops, 0))"

    def weighted(col: str, w: str) -> str:
        return f"sum({col} * {w}) / nullif(sum({w}) FILTER ({col} IS NOT NULL), 0) AS {col}"

    sums = ", ".join(
        f"sum({c})::BIGINT AS {c}"
        for c in ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops")
    )
    return (
        f"SELECT max(ts) AS ts, sum(interval_s) AS interval_s, kind, component_id, job_id, "
        f"{sums}, {weighted('wait_us', reqs)}, {weighted('service_us', reqs)}, "
        f"{weighted('queue_len', 'interval_s')}, {weighted('active_threads', 'interval_s')}, "
        f"source FROM {source} GROUP BY kind, component_id, job_id, source, {bucket}"
    )


def _downsample_metrics_sql(source: str, bucket: str) -> str:
    """Metrics per series and bucket: rates and gauges weighted by time (so value x
    interval, a counter's count, is kept), `MEAN_EVENTS` means by their events. Every row
    of a component's bucket takes the bucket's last sample time, so metrics read together
    per sample (a mean and the counters of its events) stay together."""
    events = " UNION ALL ".join(
        f"SELECT kind, component_id, job_id, ts, '{mean}' AS metric, "
        f"sum(value * interval_s) AS n FROM s WHERE starts_with(metric, '{prefix}') GROUP BY ALL"
        for mean, prefix in MEAN_EVENTS.items()
    )
    same = " AND ".join(
        f"s.{c} IS NOT DISTINCT FROM e.{c}"
        for c in ("kind", "component_id", "job_id", "ts", "metric")
    )
    return f"""
WITH s AS (SELECT *, {bucket} AS b FROM {source}),
e AS ({events}),
w AS (
  SELECT s.*, coalesce(e.n, s.interval_s, 1) AS w,
    max(s.ts) OVER (PARTITION BY s.kind, s.component_id, s.job_id, s.b) AS t
  FROM s LEFT JOIN e ON {same})
SELECT t AS ts, sum(interval_s) AS interval_s, kind, component_id, job_id, metric,
  sum(value * w) / nullif(sum(w), 0) AS value
FROM w GROUP BY kind, component_id, job_id, metric, b, t
"""


@dataclass
class Unit:
    """One rewrite: input files of one partition, the output's table and partition."""

    action: str  # merge | second_pass | downsample | drop
    table: str
    part: Part
    inputs: list[str]
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass
class CompactionReport:
    units: list[Unit] = field(default_factory=list)
    deleted: int = 0  # input files removed after their grace period
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for u in self.units:
            key = f"{u.table}:{u.action}"
            for k in ("rows_in", "rows_out", "bytes_in", "bytes_out"):
                out[key][k] += getattr(u, k)
            out[key]["files_in"] += len(u.inputs)
            out[key]["partitions"] += 1
        return {
            "seconds": round(self.seconds, 3),
            "deleted_files": self.deleted,
            "tables": {k: dict(v) for k, v in sorted(out.items())},
        }


def compact(
    root: str | Path,
    retention: RetentionSection | None = None,
    *,
    now: datetime | None = None,
    tables: Sequence[str] | None = None,
    threads: int | None = None,
    second_pass: bool = True,
) -> CompactionReport:
    """One compaction run over the dataset (one compactor at a time: a lock file).
    `second_pass=False` only merges client records (sorted by job and time)."""
    started = time.perf_counter()
    root = init_dataset(root)
    ret = retention or RetentionSection()
    now = now or datetime.now(UTC).replace(tzinfo=None)
    lock = FileLock(root / "_locks" / "compact.lock")
    if not lock.acquire():
        raise StoreError(f"{root} is being compacted by {lock.holder()}")
    report = CompactionReport()
    try:
        report.deleted = expire(root, ret.grace_s)
        con = duckdb.connect(":memory:")
        con.execute("SET enable_progress_bar = false")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        staging = root / "_staging" / "_compact"
        staging.mkdir(parents=True, exist_ok=True)
        for p in staging.iterdir():  # a killed compactor's outputs never committed
            p.unlink()
        for unit in plan(root, ret, now, tables, second_pass):
            _run(con, root, staging, unit, ret)
            report.units.append(unit)
        con.close()
        if ret.grace_s == 0:
            report.deleted += expire(root, 0)
    finally:
        lock.release()
    report.seconds = time.perf_counter() - started
    return report


def plan(
    root: Path,
    ret: RetentionSection,
    now: datetime,
    tables: Sequence[str] | None = None,
    second_pass: bool = True,
) -> list[Unit]:
    """What needs rewriting: settled partitions with several files or first-pass records,
    partitions past the retention horizons."""
    snap = take_snapshot(root)
    settled = now - timedelta(seconds=ret.settle_s)
    full = now - timedelta(days=ret.full_days)
    keep = now - timedelta(days=ret.keep_days) if ret.keep_days else None
    units: list[Unit] = []
    timed: dict[tuple[str, datetime], list[str]] = defaultdict(list)
    untimed: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for table, files in snap.files.items():
        if (
            tables is not None
            and table not in tables
            and not (table == MERGED and "client_io" in tables)
        ):
            continue
        for f in files:
            part = part_of(f)
            if table in UNTIMED:
                untimed[(table, part.group, part.date)].append(f)
            else:
                owner = "client_io" if table == MERGED else table
                timed[(owner, part.hour)].append(f)
    for (table, hour), files in sorted(timed.items()):
        end = hour + timedelta(hours=1)
        if keep is not None and end <= keep:
            units.append(Unit("drop", table, Part(table, hour, COMPACTED), files))
            continue
        if end > settled:
            continue
        names = [Path(f).name for f in files]
        if table == "client_io" and second_pass:
            if any(f.startswith("client_io/") for f in files):
                units.append(Unit("second_pass", MERGED, Part(MERGED, hour, COMPACTED), files))
        elif table == "client_io":
            raw = [f for f in files if f.startswith("client_io/")]
            if len(raw) > 1 or (raw and not Path(raw[0]).name.startswith("c-")):
                units.append(Unit("merge", table, Part(table, hour, COMPACTED), raw))
        elif end <= full and not all(n.startswith("d-") for n in names):
            units.append(Unit("downsample", table, Part(table, hour, COMPACTED), files))
        elif len(files) > 1 or not names[0].startswith(("c-", "d-")):
            units.append(Unit("merge", table, Part(table, hour, COMPACTED), files))
    for (table, group, date), files in sorted(untimed.items()):
        day_end = datetime.fromisoformat(date) + timedelta(days=1)
        if day_end <= settled and (len(files) > 1 or not Path(files[0]).name.startswith("c-")):
            hour = datetime.fromisoformat(date)
            units.append(Unit("merge", table, Part(table, hour, group), files))
    return units


def _run(con: duckdb.DuckDBPyConnection, root: Path, staging: Path, u: Unit, ret: Any) -> None:
    u.bytes_in = sum((root / f).stat().st_size for f in u.inputs)
    raw = [f for f in u.inputs if not f.startswith(f"{MERGED}/")]
    outputs: list[str] = []
    staged: dict[str, str] = {}
    if u.action != "drop":
        if u.action == "second_pass":
            merged = [f for f in u.inputs if f.startswith(f"{MERGED}/")]
            source = f"({view_sql('client_io', root, raw, merged)})"
            u.rows_in = _count(con, source)
            select = f"{second_pass_sql(source)} ORDER BY {SORT[MERGED]}"
        else:
            src = f"read_parquet({files_sql(root, u.inputs)}, union_by_name = true)"
            cols = "*" if u.table == "jobs" or u.table in MERGED_BY_KEY else columns_sql(u.table)
            source = f"(SELECT {cols} FROM {src})"
            u.rows_in = _count(con, source)
            if u.action == "downsample":
                down = downsample_sql(u.table, source, ret.downsample_s)
                select = f"SELECT {columns_sql(u.table)} FROM ({down})"
            elif u.table in MERGED_BY_KEY:  # one row per key, as the view merges them
                select = f"SELECT * FROM ({merged_by_key_sql(u.table, source)})"
            else:
                select = f"SELECT * FROM {source}"
            if u.table in SORT:
                select += f" ORDER BY {SORT[u.table]}"
        prefix = "d-" if u.action == "downsample" or _all_downsampled(u.inputs) else "c-"
        name = f"{prefix}{new_id()}.parquet"
        tmp = staging / name
        if u.table in ("client_io", MERGED):  # dictionaries and delta encodings (pyarrow)
            stream_client_records(con, select, tmp)
        else:
            con.execute(
                f"COPY ({select}) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd, "
                "ROW_GROUP_SIZE 122880)"
            )
        u.rows_out = _count(con, f"read_parquet('{tmp}')")
        _fsync(tmp)
        p = u.part
        hour = p.hour
        out = f"{p.table}/date={hour:%Y-%m-%d}/hour={hour:%H}/group={p.group}/{name}"
        outputs.append(out)
        staged[out] = str(tmp.relative_to(root))
        u.bytes_out = tmp.stat().st_size
    m = Manifest(
        "compaction",
        outputs,
        inputs=list(u.inputs),
        staged=staged,
        info={"action": u.action, "table": u.table, "rows_in": u.rows_in, "rows_out": u.rows_out},
    )
    atomic_write(root / "_compactions" / f"{new_id()}.json", m.dumps())  # the commit point
    for out in outputs:
        dst = root / out
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.rename(root / staged[out], dst)
        fsync_dir(dst.parent)


def _arrow(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    rel = con.sql(sql)
    fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
    return fetch()


def _all_downsampled(inputs: Sequence[str]) -> bool:
    return bool(inputs) and all(Path(f).name.startswith("d-") for f in inputs)


def _count(con: duckdb.DuckDBPyConnection, source: str) -> int:
    rows = con.execute(f"SELECT count(*) FROM {source}").fetchall()
    return int(rows[0][0]) if rows else 0


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def expire(root: Path, grace_s: float) -> int:
    """Delete inputs of compactions older than `grace_s`, then their manifests; returns the
    number of files deleted. Also rolls forward a compaction a killed compactor left."""
    deleted = 0
    cutoff = time.time() - grace_s
    for path in sorted((root / "_compactions").glob("*.json")):
        if path.name.startswith("."):
            continue
        m = Manifest.load(path)
        for out, staged in m.staged.items():  # finish what a killed compactor committed
            src, dst = root / staged, root / out
            if src.exists() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.rename(src, dst)
        if path.stat().st_mtime > cutoff:
            continue
        for f in m.inputs:
            with contextlib.suppress(FileNotFoundError):
                (root / f).unlink()
                deleted += 1
        for f in m.inputs:  # empty partition directories go too
            with contextlib.suppress(OSError):
                d = (root / f).parent
                for _ in range(3):
                    d.rmdir()
                    d = d.parent
        path.unlink()
    return deleted


# -- second-pass report --------------------------------------------------------------------


def second_pass_ratios(
    root: str | Path, by: str = "app", threads: int | None = None
) -> list[dict[str, Any]]:
    """Per application (or I/O mode: `by="io_mode"`), first-pass records against the
    second pass: rows and Parquet bytes (zstd) of the same records both ways."""
    root = Path(root)
    snap = take_snapshot(root)
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    merged = snap.files.get(MERGED, [])
    raw = snap.files.get("client_io", [])
    if not merged and not raw:
        return []
    jobs = view_sql("jobs", root, snap.files.get("jobs", []))
    if not jobs:
        raise StoreError(f"{root} has no jobs")
    widened = _results_table(root, "traced_jobs")  # the jobs view reads through it
    if widened is not None:
        con.execute(f"CREATE TEMP VIEW traced_jobs AS SELECT * FROM read_parquet('{widened}')")
    else:
        con.register("traced_jobs", TABLES["traced_jobs"].empty_table())
    con.execute(f"CREATE TEMP VIEW jobs AS {jobs}")
    con.execute(f"CREATE TEMP VIEW client_io AS {view_sql('client_io', root, raw, merged)}")
    if by == "io_mode":
        results = _results_table(root, "job_summaries")
        if results is None:
            raise StoreError(f"{root} has no job summaries yet (run iolens analyze)")
        con.execute(f"CREATE TEMP VIEW js AS SELECT * FROM read_parquet('{results}')")
        label = "coalesce(js.io_mode, '?')"
        join = "LEFT JOIN js USING (job_id)"
    else:
        label, join = "coalesce(j.app, '?')", ""
    con.execute(
        f"CREATE TEMP TABLE labelled AS SELECT c.*, {label} AS pattern FROM client_io c "
        f"JOIN jobs j USING (job_id) {join}"
    )
    out = []
    tmp = root / "_staging" / "_report"
    tmp.mkdir(parents=True, exist_ok=True)
    patterns = [r[0] for r in con.execute("SELECT DISTINCT pattern FROM labelled").fetchall()]
    for pat in sorted(patterns):
        con.execute(
            "CREATE OR REPLACE TEMP TABLE one AS SELECT * EXCLUDE (pattern) FROM labelled "
            "WHERE pattern = ?",
            [pat],
        )
        first = _arrow(
            con, f"SELECT {columns_sql('client_io')} FROM one ORDER BY {SORT['client_io']}"
        )
        second = _arrow(con, f"{second_pass_sql('one')} ORDER BY {SORT[MERGED]}")
        b1 = write_client_records(first, tmp / "first.parquet")
        b2 = write_client_records(second, tmp / "second.parquet")
        rows, merged_rows = first.num_rows, second.num_rows
        out.append(
            {
                by: pat,
                "records": rows,
                "merged_rows": merged_rows,
                "row_ratio": round(rows / max(1, merged_rows), 2),
                "first_pass_bytes": b1,
                "second_pass_bytes": b2,
                "byte_ratio": round(b1 / max(1, b2), 2),
            }
        )
    for p in tmp.iterdir():
        p.unlink()
    con.close()
    return out


def _results_table(root: Path, table: str) -> Path | None:
    from iolens.store.visibility import read_head

    name = read_head(root).get("tables", {}).get(table)
    return root / "_results" / name if name else None


def dataset_bytes(root: str | Path) -> dict[str, int]:
    """Bytes of the visible segments per table."""
    root = Path(root)
    snap = take_snapshot(root)
    return {
        t: sum((root / f).stat().st_size for f in files) for t, files in snap.files.items() if files
    }


__all__ = [
    "CompactionReport",
    "compact",
    "dataset_bytes",
    "downsample_sql",
    "expire",
    "plan",
    "second_pass_ratios",
    "second_pass_sql",
]
