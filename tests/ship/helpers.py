"""Batches of server samples with known totals, for shipping tests."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from iolens.model.batch import Batch
from iolens.model.schema import SERVER_SAMPLES


def samples_batch(i: int, rows: int = 50, key: str | None = None) -> Batch:
    ts = (1_741_000_000 + i * rows + np.arange(rows)) * 1_000_000
    table = pa.table(
        {
            "ts": ts.astype("datetime64[us]"),
            "interval_s": np.ones(rows),
            "kind": ["ost"] * rows,
            "component_id": [f"lustre-OST{i % 4:04x}"] * rows,
            "job_id": pa.nulls(rows, pa.string()),
            "read_bytes": np.arange(rows, dtype=np.int64) * (i + 1),
            "write_bytes": np.full(rows, i, np.int64),
            "read_ops": np.ones(rows, np.int64),
            "write_ops": np.ones(rows, np.int64),
            "md_ops": np.zeros(rows, np.int64),
            "wait_us": np.zeros(rows),
            "service_us": np.zeros(rows),
            "queue_len": np.zeros(rows),
            "active_threads": np.zeros(rows),
            "source": pa.nulls(rows, pa.string()),
        },
        schema=SERVER_SAMPLES,
    )
    return Batch(source="test-agent", key=key or f"agent-1:{i}", server_samples=table)


def totals(batches: list[Batch]) -> tuple[int, int]:
    rows = sum(b.server_samples.num_rows for b in batches)
    read = sum(int(pa.compute.sum(b.server_samples["read_bytes"]).as_py()) for b in batches)
    return rows, read


def null_kind_batch(i: int) -> Batch:
    """`samples_batch(i)` with NULL in the NOT NULL `kind` column: a batch the store refuses."""
    batch = samples_batch(i)
    t = batch.server_samples
    batch.server_samples = t.set_column(
        t.schema.get_field_index("kind"), "kind", pa.nulls(t.num_rows, pa.string())
    )
    return batch
