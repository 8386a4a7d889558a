"""The SQL that shows a table's segment files as the model's table: jobs and files merged
by key as `ingest.load` merges them, other tables cast to the model's types, and
second-pass client records expanded back into first-pass rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from iolens.errors import StoreError
from iolens.model.schema import MERGED_BY_KEY, TABLES, job_precedence_sql
from iolens.store.dataset_layout import PARTIAL, SEQ


def files_sql(root: Path, files: Sequence[str]) -> str:
    """The files under `root` as a DuckDB list literal, for `read_parquet`."""
    return "[" + ", ".join("'" + str(root / f).replace("'", "''") + "'" for f in files) + "]"


def columns_sql(table: str) -> str:
    """The model's columns of `table`, quoted, in the model's order."""
    return ", ".join(f'"{n}"' for n in TABLES[table].names)


def _sql_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"{_sql_type(t.value_type)}[]"
    for test, name in (
        (pa.types.is_string, "VARCHAR"),
        (pa.types.is_int64, "BIGINT"),
        (pa.types.is_int32, "INTEGER"),
        (pa.types.is_floating, "DOUBLE"),
        (pa.types.is_timestamp, "TIMESTAMP"),
        (pa.types.is_boolean, "BOOLEAN"),
    ):
        if test(t):
            return name
    raise StoreError(f"no SQL type for {t}")


def _typed_cols(table: str) -> str:
    """The model's columns cast to the model's types (segments written by an older or
    newer writer, or widened by an aggregate, still read as the model says)."""
    return ", ".join(f'"{f.name}"::{_sql_type(f.type)} AS "{f.name}"' for f in TABLES[table])


_MERGED_EXPAND = """
SELECT job_id, unnest(nodes) AS node, unnest(ranks) AS rank, unnest(pids) AS pid, layer, op,
  unnest(coalesce(file_ids, list_resize([file_id], members, file_id))) AS file_id,
  unnest(offsets) AS "offset", size, stride, count,
  t_start + to_microseconds(unnest(coalesce(dt_start, list_resize([0::BIGINT], members, 0))))
    AS t_start,
  t_end + to_microseconds(unnest(coalesce(dt_end, list_resize([0::BIGINT], members, 0))))
    AS t_end,
  unnest(coalesce(durs, list_resize([dur_ns], members, dur_ns))) AS dur_ns
FROM read_parquet({files})
"""


def merged_by_key_sql(table: str, src: str) -> str:
    """Rows of a `MERGED_BY_KEY` table over `src` as `ingest.load` keeps them: per key
    and column, the newest non-null value (segments written before the table merged
    have no `_seq` and count as oldest), with the newest `_seq` of the key."""
    key = MERGED_BY_KEY[table]
    seq = f"coalesce({SEQ}, 0)"
    picks = ", ".join(
        f'arg_max("{c}", {seq}) FILTER (WHERE "{c}" IS NOT NULL) AS "{c}"'
        for c in TABLES[table].names
        if c != key
    )
    return f'SELECT "{key}", {picks}, max({seq}) AS {SEQ} FROM {src} GROUP BY "{key}"'


#: Columns of a trace-only job the analysis widens to all its processes (`traced_jobs`).
_WIDENED = ("nodes", "nprocs", "start", "end")


def _with_traced_widening(rows: str) -> str:
    """Jobs over `rows` with a trace-only job's span and size as the analysis widened
    them (`store.queries.refresh_traced_jobs` writes `traced_jobs`; the segments keep the
    first process's view, which no reader should take for the job)."""
    cols = ", ".join(
        f'CASE WHEN j.source = \'tracer\' AND w.job_id IS NOT NULL THEN w."{c}" ELSE j."{c}" END'
        f' AS "{c}"'
        if c in _WIDENED
        else f'j."{c}"'
        for c in TABLES["jobs"].names
    )
    return f"SELECT {cols} FROM ({rows}) AS j LEFT JOIN traced_jobs AS w USING (job_id)"


def view_sql(table: str, root: Path, files: Sequence[str], merged: Sequence[str] = ()) -> str:
    """SELECT giving `table` in model form over segment files (None: no files)."""
    cols = columns_sql(table)
    if not files and not (table == "client_io" and merged):
        return ""
    src = f"read_parquet({files_sql(root, files)}, union_by_name = true)"
    if table == "jobs":
        # Jobs merge by id as ingest.load merges them: per column, the non-null value of
        # the full source of highest precedence (the newest on a tie) wins; a partial view
        # (one process's trace) counts only if it came first, and then only where no full
        # source says anything.
        order = f"{{'p': {job_precedence_sql('r')}, 's': {SEQ}}}"
        picks = ", ".join(
            f'coalesce(arg_max("{c}", {order}) FILTER (WHERE NOT {PARTIAL}), '
            f'CASE WHEN arg_min({PARTIAL}, {SEQ}) THEN arg_min_null("{c}", {SEQ}) END) AS "{c}"'
            for c in TABLES["jobs"].names
            if c != "job_id"
        )
        return _with_traced_widening(f"SELECT job_id, {picks} FROM {src} AS r GROUP BY job_id")
    if table in MERGED_BY_KEY:
        return f"SELECT {cols} FROM ({merged_by_key_sql(table, src)})"
    sql = f"SELECT {_typed_cols(table)} FROM {src}" if files else ""
    if table == "client_io" and merged:
        expand = _MERGED_EXPAND.format(files=files_sql(root, merged))
        sql = f"{sql} UNION ALL {expand}" if sql else expand
    return sql
