"""Loading batches into the store: validation against the model, upserts, idempotency."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from iolens.errors import InputError
from iolens.ingest.traced_targets import Declared, target_rows
from iolens.model.batch import Batch
from iolens.model.schema import MERGED_BY_KEY, TABLES, job_precedence_sql
from iolens.store.base import Store

if TYPE_CHECKING:
    from iolens.store.segments import SegmentWriter


def load(store: Store, batch: Batch) -> dict[str, int]:
    """Append a batch atomically: either every table lands or none does.

    Returns rows appended per table; empty when the batch's key was loaded before.
    """
    return load_many(store, [batch])[0]


def load_many(store: Store, batches: list[Batch]) -> list[dict[str, int]]:
    """Load several batches in one transaction (group commit); counts per batch.

    Batches with a key loaded before, or repeated within the group, are skipped. Tables
    of the same name are concatenated and appended once, which is what lets one ingest
    server keep up with thousands of agents.
    """
    for b in batches:
        if b.extra.get("trace_owner") is not None:  # a trace from a shared spool
            # imported here: the tracer's decoder is not needed by anything else that
            # imports ingest (`iolens darshan` reads a log through this package)
            from iolens.ingest.importers.trace import own_jobs

            own_jobs(store, b)
    conformed = [_conformed(b) for b in batches]
    counts: list[dict[str, int]] = [{} for _ in batches]
    with store.transaction():
        keys = [b.key for b in batches if b.key is not None]
        known: set[str] = set()
        if keys:
            store.register("_iolens_keys_in", pa.table({"key": pa.array(keys, pa.string())}))
            try:
                known = set(
                    store.query("SELECT key FROM ingested JOIN _iolens_keys_in USING (key)")
                    .column("key")
                    .to_pylist()
                )
            finally:
                store.unregister("_iolens_keys_in")
        merged: dict[str, list[pa.Table]] = {}
        loaded_keys: list[tuple[str, str, int]] = []
        for i, (batch, tables) in enumerate(zip(batches, conformed, strict=True)):
            if batch.key is not None:
                if batch.key in known:
                    continue
                known.add(batch.key)
            if "jobs" in tables:
                # Jobs merge by id: what a source says replaces what a source of no
                # higher precedence said, what it leaves null is kept (a prolog knows the
                # start, an epilog the end). A partial view (one process's trace) only
                # adds jobs nobody reported.
                if batch.keep_known_jobs:
                    tables["jobs"] = _without_known(store, tables["jobs"])
                else:
                    tables["jobs"] = _merge_known_jobs(store, tables["jobs"])
            if "client_io" in tables:  # servers without jobstats: attribute the trace
                derived = target_rows(store, tables["client_io"], tables.get("files"))
                if derived is not None:
                    own = tables.get("server_samples")
                    tables["server_samples"] = (
                        derived if own is None else pa.concat_tables([own, derived])
                    )
            for name, key in MERGED_BY_KEY.items():
                if name in tables:
                    tables[name] = _merge_by_key(store, name, key, tables[name])
            for name, table in tables.items():
                if name == "jobs" or name in MERGED_BY_KEY:  # appended now: later batches see them
                    counts[i][name] = store.append(name, table)
                else:
                    merged.setdefault(name, []).append(table)
                    counts[i][name] = table.num_rows
            if batch.key is not None:
                loaded_keys.append((batch.key, batch.source, sum(counts[i].values())))
        for name, parts in merged.items():
            store.append(name, pa.concat_tables(parts))
        if loaded_keys:
            now = datetime.now(UTC).replace(tzinfo=None)
            store.append(
                "ingested",
                pa.table(
                    {
                        "key": [k for k, _, _ in loaded_keys],
                        "source": [s for _, s, _ in loaded_keys],
                        "rows": [n for _, _, n in loaded_keys],
                        "loaded_at": [now] * len(loaded_keys),
                    }
                ),
            )
    return counts


_DECLARED: weakref.WeakKeyDictionary[SegmentWriter, Declared] = weakref.WeakKeyDictionary()


def load_segments(writer: SegmentWriter, batches: list[Batch]) -> list[dict[str, int]]:
    """The scale-out ingest server's loader: `load_many`'s trace attribution, then the
    group's segments. The writer cannot query its dataset, so which targets keep no
    jobstats is learned from the batches it sees (`Declared`)."""
    declared = _DECLARED.setdefault(writer, Declared())
    tables: list[dict[str, pa.Table] | None] = []
    for b in batches:
        try:
            tables.append(b.conformed())
        except InputError:
            tables.append(None)  # the writer names the problem
    for t in tables:
        if t is not None and "metrics" in t:
            declared.learn(t["metrics"])
    out = []
    for b, t in zip(batches, tables, strict=True):
        derived = declared.attribute(t) if t is not None else None
        if derived is not None:
            own = t.get("server_samples")  # type: ignore[union-attr]
            both = derived if own is None else pa.concat_tables([own, derived])
            b = dataclasses.replace(b, server_samples=both)
        out.append(b)
    return writer.load_many(out)


def _conformed(batch: Batch) -> dict[str, pa.Table]:
    """The batch's tables in the model schema; InputError naming the table and column of a
    NULL where the model (and the store) has NOT NULL, which the store would refuse with
    the whole transaction."""
    for name, table in batch.tables().items():
        for f in TABLES[name]:
            if not f.nullable and f.name in table.column_names and table[f.name].null_count:
                raise InputError(
                    batch.source,
                    f"table {name}, column {f.name}: {table[f.name].null_count} NULL "
                    "values in a NOT NULL column",
                )
    return batch.conformed()


def _merge_known_jobs(store: Store, jobs: pa.Table) -> pa.Table:
    """Rows of `jobs` merged with the stored rows, which are then removed.

    Per column, the row of higher precedence (`job_precedence_sql`; the newer on a tie)
    gives the value, the other fills its nulls.
    """
    store.register("_iolens_new_jobs", jobs)
    try:
        new_wins = f"o.job_id IS NULL OR {job_precedence_sql('n')} >= {job_precedence_sql('o')}"
        cols = ", ".join(
            f'CASE WHEN {new_wins} THEN coalesce(n."{c}", o."{c}") '
            f'ELSE coalesce(o."{c}", n."{c}") END AS "{c}"'
            for c in jobs.column_names
            if c != "job_id"
        )
        merged = store.query(
            f"SELECT n.job_id, {cols} FROM _iolens_new_jobs n "
            "LEFT JOIN jobs o ON o.job_id = n.job_id"
        )
    finally:
        store.unregister("_iolens_new_jobs")
    _delete_keys(store, "jobs", "job_id", jobs)
    return merged.select(jobs.column_names).cast(jobs.schema)


def _merge_by_key(store: Store, name: str, key: str, rows: pa.Table) -> pa.Table:
    """`rows` merged with the stored rows of their keys, which are then removed.

    Per column, the newest non-null value wins: within the batch the later row, then the
    batch over the store. A null never erases a known value (an agent's OST row without
    a peak keeps the site's peak; a trace of a file without its layout keeps the layout).

    Cost: one scan finds the stored rows (keys inlined when few, so DuckDB filters the
    scan; only the columns the batch leaves null somewhere are read, which skips a big
    table's paths), the delete goes by row id, and the merge itself is done on the few
    rows concerned in Python.
    """
    if pc.count_distinct(rows.column(key)).as_py() != rows.num_rows:
        rows = _newest_per_key(rows, key)
    gaps = [c for c in rows.column_names if c != key and rows.column(c).null_count]
    with _keys_in(store, key, rows) as where:
        picked = "".join(f', "{c}"' for c in gaps)
        old = store.query(f'SELECT rowid AS _rowid, "{key}"{picked} FROM {name} WHERE {where}')
    if not old.num_rows:
        return rows
    with _keys_in(store, "_rowid", old, target="rowid") as where:
        store.execute(f"DELETE FROM {name} WHERE {where}")
    known: dict[Any, dict[str, Any]] = {}
    for r in old.select([key, *gaps]).to_pylist():
        mine = known.setdefault(r[key], {})
        for c in gaps:
            if mine.get(c) is None:
                mine[c] = r[c]
    keys = rows.column(key).to_pylist()
    for c in gaps:
        values = rows.column(c).to_pylist()
        filled = [
            v if v is not None else known.get(k, {}).get(c)
            for k, v in zip(keys, values, strict=True)
        ]
        rows = rows.set_column(
            rows.schema.get_field_index(c),
            rows.schema.field(c),
            pa.array(filled, rows.schema.field(c).type),
        )
    return rows


def _newest_per_key(rows: pa.Table, key: str) -> pa.Table:
    """One row per key: per column the value of the last row that has one."""
    merged: dict[Any, dict[str, Any]] = {}
    for r in rows.to_pylist():
        mine = merged.setdefault(r[key], {})
        mine.update({c: v for c, v in r.items() if v is not None or c not in mine})
    return pa.Table.from_pylist(list(merged.values()), schema=rows.schema)


def _without_known(store: Store, jobs: pa.Table) -> pa.Table:
    """The rows of `jobs` whose id the store does not know yet (a join, not a scan of every
    stored id: this runs for each trace batch)."""
    store.register("_iolens_partial_jobs", jobs)
    try:
        new = store.query(
            "SELECT * FROM _iolens_partial_jobs n "
            "WHERE NOT EXISTS (SELECT 1 FROM jobs o WHERE o.job_id = n.job_id)"
        )
    finally:
        store.unregister("_iolens_partial_jobs")
    return new.select(jobs.column_names).cast(jobs.schema)


def _delete_keys(store: Store, table: str, key: str, rows: pa.Table) -> None:
    with _keys_in(store, key, rows) as where:
        store.execute(f"DELETE FROM {table} WHERE {where}")


#: Up to this many keys are written into the SQL as a literal list (as `queries.INLINE_IDS`).
INLINE_KEYS = 2048


@contextmanager
def _keys_in(store: Store, key: str, rows: pa.Table, target: str | None = None) -> Iterator[str]:
    """A WHERE condition matching the distinct `key` values of `rows` (in the column
    `target`, by default `key`): a literal IN list when few (integers as they are,
    strings quoted), else a semi-join with them."""
    column = target or f'"{key}"'
    values = rows.column(key).unique()
    if len(values) <= INLINE_KEYS:
        items = values.to_pylist()
        if pa.types.is_integer(values.type):
            literal = ", ".join(str(int(v)) for v in items)
        else:
            literal = ", ".join("'" + str(v).replace("'", "''") + "'" for v in items)
        yield f"{column} IN ({literal})" if items else "false"
        return
    store.register("_iolens_keys", pa.table({key: values}))
    try:
        yield f'{column} IN (SELECT "{key}" FROM _iolens_keys)'
    finally:
        store.unregister("_iolens_keys")
