"""Tracer spool files -> batches, one per process file.

Each file becomes one batch keyed by its host, pid and start time, so importing a spool
twice (or a retried delivery) adds nothing. A file whose job the scheduler already
reported keeps the scheduler's job row; jobs seen only through traces get a row derived
from all of their processes (`refresh_traced_jobs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.store.base import Store
from iolens.tracefile import SUFFIX, batch_of, decode

SPOOL_SUFFIX = SUFFIX


def spool_files(paths: Iterable[Path]) -> list[Path]:
    """Trace files under the given files or directories (recursively), in name order."""
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(x for x in p.rglob(f"*{SPOOL_SUFFIX}") if x.is_file())
        elif p.is_file():
            found.append(p)
        else:
            raise InputError(str(p), "no such file or directory")
    return found


def batches(paths: Iterable[Path], job_id: str | None = None) -> Iterator[tuple[Path, Batch]]:
    for path in spool_files(paths):
        yield path, batch_of(decode(path), job_id)


def refresh_traced_jobs(store: Store, job_ids: Iterable[str], state: str | None = None) -> None:
    """Recompute nodes, process count and run time of tracer-only jobs from their records."""
    ids = pa.table({"job_id": pa.array(sorted(set(job_ids)), pa.string())})
    if ids.num_rows == 0:
        return
    store.register("_iolens_traced", ids)
    try:
        agg = store.query("""
            SELECT job_id, list(DISTINCT node ORDER BY node) AS nodes,
                   count(DISTINCT (node, pid))::INTEGER AS nprocs,
                   min(t_start) AS start, max(t_end) AS "end"
            FROM client_io JOIN _iolens_traced USING (job_id) GROUP BY job_id""")
    finally:
        store.unregister("_iolens_traced")
    with store.transaction():
        for row in agg.to_pylist():
            store.execute(
                'UPDATE jobs SET nodes = ?, nprocs = ?, "start" = least("start", ?), '
                '"end" = greatest("end", ?), state = coalesce(?, state) '
                "WHERE job_id = ? AND source = 'tracer'",
                [row["nodes"], row["nprocs"], row["start"], row["end"], state, row["job_id"]],
            )


def job_ids_of(batch: Batch) -> list[str]:
    if batch.client_io is None or batch.client_io.num_rows == 0:
        return [r["job_id"] for r in batch.jobs.to_pylist()] if batch.jobs else []
    return pc.unique(batch.client_io.column("job_id")).to_pylist()
