"""Loading batches into the store: validation against the model, upserts, idempotency."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.model.schema import TABLES
from iolens.store.base import Store


def conform(table: pa.Table, name: str, source: str) -> pa.Table:
    """Cast `table` to the model schema of `name`, or say which column is wrong."""
    schema = TABLES[name]
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise InputError(source, f"{name}: missing columns {', '.join(missing)}")
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise InputError(source, f"{name}: {exc}") from None


def load(store: Store, batch: Batch) -> dict[str, int]:
    """Append a batch atomically: either every table lands or none does.

    Returns rows appended per table; empty when the batch's key was loaded before.
    """
    tables = {name: conform(t, name, batch.source) for name, t in batch.tables().items()}
    counts: dict[str, int] = {}
    with store.transaction():
        if batch.key is not None:
            seen = store.query("SELECT 1 FROM ingested WHERE key = ? LIMIT 1", [batch.key])
            if seen.num_rows:
                return {}
        # Jobs and files are upserts by key: a later source may know more about them.
        if "jobs" in tables:
            if batch.keep_known_jobs:
                tables["jobs"] = _without_known(store, tables["jobs"])
            else:
                _delete_keys(store, "jobs", "job_id", tables["jobs"])
        if "files" in tables:
            _delete_keys(store, "files", "file_id", tables["files"])
        for name, table in tables.items():
            counts[name] = store.append(name, table)
        if batch.key is not None:
            store.append(
                "ingested",
                pa.table(
                    {
                        "key": [batch.key],
                        "source": [batch.source],
                        "rows": [sum(counts.values())],
                        "loaded_at": [datetime.now(UTC).replace(tzinfo=None)],
                    }
                ),
            )
    return counts


def _without_known(store: Store, jobs: pa.Table) -> pa.Table:
    known = set(store.query("SELECT job_id FROM jobs").column("job_id").to_pylist())
    keep = [job_id not in known for job_id in jobs.column("job_id").to_pylist()]
    return jobs.filter(pa.array(keep, pa.bool_()))


def _delete_keys(store: Store, table: str, key: str, rows: pa.Table) -> None:
    keys = pa.table({key: rows.column(key).unique()})
    store.register("_iolens_keys", keys)
    try:
        store.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM _iolens_keys)")
    finally:
        store.unregister("_iolens_keys")
