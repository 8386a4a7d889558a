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
from iolens.model.schema import JOBS, MPI_HINTS
from iolens.tracefile.trace import TraceFile, display

#: Programs that start a job's processes: MPI launchers, their daemons and Slurm's step
#: launcher. They read system files and their own session directory and do none of the
#: job's I/O, and Darshan never records them (it starts in `MPI_Init`). Counted, a traced
#: `mpirun` made a 32-rank file-per-process job "33 processes, N-M" and named the job's
#: application `orterun`, so their traces load as nothing (each file's key is still kept:
#: it is not read again).
LAUNCHERS = frozenset({
    "mpirun", "mpiexec", "orterun", "orted", "prterun", "prted", "prte", "mpiexec.hydra",
    "hydra_pmi_proxy", "srun", "slurmstepd",
})  # fmt: skip


def batch_of(
    trace: TraceFile,
    job_id: str | None = None,
    owner: tuple[int, str] | None = None,
    layouts: dict[str, list[str]] | None = None,
) -> Batch:
    """The batch of one process's trace; `job_id` overrides the one the tracer saw.

    `owner` (uid, name) is the file's owner as an agent saw it in a shared spool: the user
    is then the owner, never what the file claims (anyone can write any name into it),
    and the batch asks the loader to accept the file's job id only if that job is the
    owner's (`extra["trace_owner"]`, see `ingest.importers.trace.own_jobs`). A file root
    owns is root's word: its claim stands. `layouts` (path -> the servers holding its
    data, which the agent asked of MooseFS: `collect.file_layouts`) fills the `osts` of
    files whose layout the tracer did not record.
    """
    if trace.exe and Path(trace.exe).name in LAUNCHERS:
        return Batch(source=f"tracer:{display(trace.path)}", key=batch_key(trace))
    job = job_id or trace.job_id
    user = trace.user or getpass.getuser()
    trusted = owner is None or owner[0] == 0
    if not trusted:
        user = owner[1]
    client = trace.client_io
    if job_id is not None:
        client = _with_job(client, job)
    row = {
        "job_id": job,
        "user": user,
        "app": Path(trace.exe).name if trace.exe else None,
        "nodes": [trace.host],
        "nprocs": 1,
        "start": trace.start,
        "end": trace.end,
        "state": None,
        "source": "tracer",
    }
    batch = Batch(
        source=f"tracer:{display(trace.path)}",
        key=batch_key(trace),
        keep_known_jobs=True,
        jobs=pa.Table.from_pylist([row], schema=JOBS),
        files=_with_layouts(trace.files, layouts) if layouts else trace.files,
        client_io=client,
        mpi_hints=_hints_table(trace, job),
    )
    if not trusted:
        batch.extra["trace_owner"] = user
        fallback = f"unknown-{trace.host}-{user}"
        # a job it may use when its own is another user's, the last one unique to the file
        batch.extra["trace_jobs"] = [fallback, f"{fallback}-{trace.pid}-{trace.start:%Y%m%d%H%M%S}"]
    return batch


def batch_key(trace: TraceFile) -> str:
    """One key per file: a process's segments (failed exec) and interim files each load
    once; the final file of segment 0 keeps the key older iolens gave it."""
    key = f"trace:{trace.host}:{trace.pid}:{trace.start.isoformat()}"
    if trace.segment:
        key += f":s{trace.segment}"
    if trace.interim:
        key += f":i{trace.interval}"
    return key


def _with_layouts(files: pa.Table, layouts: dict[str, list[str]]) -> pa.Table:
    osts = files.column("osts").to_pylist()
    paths = files.column("path").to_pylist()
    filled = [o if o else layouts.get(p) for o, p in zip(osts, paths, strict=True)]
    return files.set_column(
        files.schema.get_field_index("osts"), "osts", pa.array(filled, pa.list_(pa.string()))
    )


def _with_job(table: pa.Table, job: str) -> pa.Table:
    return table.set_column(
        table.schema.get_field_index("job_id"),
        "job_id",
        pa.array([job] * table.num_rows, pa.string()),
    )


def reassign(batch: Batch, job: str) -> None:
    """Move a trace batch to job `job` (its file claimed a job that is not its owner's)."""
    batch.client_io = _with_job(batch.client_io, job)
    batch.jobs = _with_job(batch.jobs, job)


def hints_text(hints: dict[str, str]) -> str:
    """`{key: value}` as the store keeps it: "key=value;key=value", keys sorted, so one set
    of hints is one string whatever order the application set them in."""
    return ";".join(f"{k}={v}" for k, v in sorted(hints.items()))


def _hints_table(trace: TraceFile, job: str) -> pa.Table | None:
    """The MPI-IO hints of the trace's files (`mpi_hints` rows), None when it has none."""
    if not trace.hints:
        return None
    ids = dict(
        zip(
            trace.files.column("path").to_pylist(),
            trace.files.column("file_id").to_pylist(),
            strict=True,
        )
    )
    rows = [
        {"job_id": job, "file_id": ids[path], "node": trace.host, "pid": trace.pid,
         "rank": trace.rank, "hints": hints_text(h)}
        for path, h in trace.hints.items()
        if path in ids and h
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=MPI_HINTS) if rows else None
