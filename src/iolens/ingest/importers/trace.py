"""Tracer spool files -> batches, one per process file.

Each file becomes one batch keyed by its host, pid and start time, so importing a spool
twice (or a retried delivery) adds nothing. A file whose job the scheduler already
reported keeps the scheduler's job row; jobs seen only through traces get a row derived
from all of their processes (`refresh_traced_jobs`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow.compute as pc

from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.store.base import Store
from iolens.tracefile import SUFFIX, batch_of, decode
from iolens.tracefile.batch import reassign

log = logging.getLogger(__name__)

SPOOL_SUFFIX = SUFFIX


def spool_files(paths: Iterable[Path]) -> list[Path]:
    """Trace files under the given files or directories (recursively, but not in the `bad/`
    folders of files quarantined before), in name order."""
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(
                x
                for x in p.rglob(f"*{SPOOL_SUFFIX}")
                if x.is_file() and "bad" not in x.relative_to(p).parts[:-1]
            )
        elif p.is_file():
            found.append(p)
        else:
            raise InputError(str(p), "no such file or directory")
    return found


def batches(
    paths: Iterable[Path], job_id: str | None = None
) -> Iterator[tuple[Path, Batch | InputError]]:
    """One batch per file, or the InputError naming the file that does not decode (the
    caller reports it and goes on: one bad file costs only itself)."""
    for path in spool_files(paths):
        try:
            yield path, batch_of(decode(path), job_id)
        except InputError as exc:
            yield path, exc


def quarantine(path: Path) -> Path | None:
    """Move a file that does not decode to `bad/` beside it (never deleted: it is somebody's
    data); None when it cannot be moved (a read-only spool, someone else's directory)."""
    bad = path.parent / "bad"
    if path.parent.name == "bad":  # already set aside
        return path
    try:
        bad.mkdir(mode=0o700, exist_ok=True)
        if bad.is_symlink() or not bad.is_dir():
            return None
        dest = bad / path.name
        path.replace(dest)
    except OSError:
        return None
    return dest


def own_jobs(store: Store, batch: Batch) -> None:
    """A trace from a shared spool names a job its owner may not run: the job id it claims
    stands only if the store has no such job or has it as the owner's (the scheduler's
    rows, or the owner's earlier traces). Else the trace goes to the job the scheduler says
    the owner ran on that node at that time, if any, else to the owner's own
    `unknown-<host>-<user>` job, with a warning. Nothing is dropped."""
    owner = batch.extra.get("trace_owner")
    if owner is None or batch.jobs is None:
        return
    row = batch.jobs.to_pylist()[0]
    claimed = row["job_id"]
    if _owned(store, claimed, owner):
        return
    job = _scheduled(store, owner, row["nodes"][0], row["start"])
    if job is None:
        spare = batch.extra["trace_jobs"]  # the last is unique to the file
        job = next((j for j in spare if _owned(store, j, owner)), spare[-1])
    log.warning(
        "%s: the trace of user %s names job %s, which is another user's: loaded as job %s",
        batch.source,
        owner,
        claimed,
        job,
    )
    reassign(batch, job)


def _owned(store: Store, job: str, user: str) -> bool:
    """No such job yet, or `user`'s."""
    rows = store.query('SELECT "user" FROM jobs WHERE job_id = ?', [job]).to_pylist()
    return not rows or rows[0]["user"] == user


def _scheduled(store: Store, user: str, node: str, at: object) -> str | None:
    """The job a scheduler (not a trace) says `user` ran on `node` at `at`, the latest."""
    rows = store.query(
        "SELECT job_id FROM jobs WHERE \"user\" = ? AND source <> 'tracer' "
        'AND list_contains(nodes, ?) AND "start" <= ? AND coalesce("end", ?) >= ? '
        'ORDER BY "start" DESC LIMIT 1',
        [user, node, at, at, at],
    ).to_pylist()
    return rows[0]["job_id"] if rows else None


def job_ids_of(batch: Batch) -> list[str]:
    if batch.client_io is None or batch.client_io.num_rows == 0:
        return [r["job_id"] for r in batch.jobs.to_pylist()] if batch.jobs else []
    return pc.unique(batch.client_io.column("job_id")).to_pylist()
