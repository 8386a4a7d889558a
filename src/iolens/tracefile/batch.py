"""One process's trace -> one idempotent batch for the store.

Shared by `iolens import trace`, `iolens trace` and the agent's tracer-spool source, so a
file imported by hand and the same file shipped by an agent carry the same key and load
once.
"""

from __future__ import annotations

import getpass
from pathlib import Path

import pyarrow as pa

from iolens.model.batch import Batch
from iolens.model.schema import JOBS
from iolens.tracefile.trace import TraceFile


def batch_of(trace: TraceFile, job_id: str | None = None) -> Batch:
    """The batch of one process's trace; `job_id` overrides the one the tracer saw."""
    job = job_id or trace.job_id
    client = trace.client_io
    if job_id is not None:
        client = client.set_column(
            client.schema.get_field_index("job_id"),
            "job_id",
            pa.array([job] * client.num_rows, pa.string()),
        )
    row = {
        "job_id": job,
        "user": trace.user or getpass.getuser(),
        "app": Path(trace.exe).name if trace.exe else None,
        "nodes": [trace.host],
        "nprocs": 1,
        "start": trace.start,
        "end": trace.end,
        "state": None,
        "source": "tracer",
    }
    return Batch(
        source=f"tracer:{trace.path}",
        key=f"trace:{trace.host}:{trace.pid}:{trace.start.isoformat()}",
        keep_known_jobs=True,
        jobs=pa.Table.from_pylist([row], schema=JOBS),
        files=trace.files,
        client_io=client,
    )
