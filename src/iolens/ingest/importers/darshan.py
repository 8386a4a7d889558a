"""Darshan logs -> the store: the log itself, the job, its files and its client I/O.

Most centres already keep a Darshan log per job, so importing them gives iolens every
job's I/O without deploying anything. Each log is stored three ways:

* `darshan_logs` / `darshan_modules` / `darshan_records`: the log as Darshan wrote it
  (counters in each module's counter-name order), so the Darshan analyses can rebuild the
  `DarshanJob` later (`iolens.store.darshan`);
* `jobs` and `files` (paths, Lustre stripe size and OSTs from the LUSTRE module), merged
  with what the scheduler and other sources said about the same job and files;
* `client_io` in the tracer's compressed form, so the per-job report (bytes, ops, I/O mode,
  processes, bandwidth over time) works on Darshan jobs as on traced ones. Data rows come
  from DXT when its module is complete (segments merged like the tracer does), otherwise
  from the counters, spread so bytes and op counts are exact; metadata rows always come
  from the counters. Only the layer that reaches the file system is stored: POSIX, STDIO
  and DFS; MPI-IO only for files POSIX did not see (it runs on top of POSIX), never
  HDF5/PnetCDF (above both), so no byte is counted twice.

HEATMAP bins become `metrics` rows (kind `compute`, component `darshan:JOB`, one series
per module and direction, in bytes/s); AutoPerf (APMPI/APXC) records are kept as modules.

libdarshan-util reads each log in a worker process (`darshan_decode`), so a log that
crashes it fails alone. Every log is keyed by a hash of its content: re-importing skips
it. Small logs are written in groups, one transaction each (per-statement costs dominate
a small log); a log whose DXT runs past `DXT_CHUNK` client rows gets a transaction of
its own and streams them in chunks, so memory stays bounded. A log that fails to parse
leaves nothing behind. A log without module data (Darshan was disabled, or the process
did no I/O) is an error rather than a job with no I/O: there is nothing to diagnose, and
it usually means instrumentation failed.

This module runs the batch; the steps sit beside it: `darshan_context` (what they share),
`darshan_dxt` and `darshan_counters` (client_io), `darshan_tables` (the other tables),
`darshan_writer` (transactions and merging with the store).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from iolens.errors import InputError, IolensError
from iolens.ingest.darshan_decode import DecoderPool
from iolens.ingest.darshan_input import EMPTY_LOG, log_files
from iolens.ingest.importers.darshan_context import SOURCE, ImportResult, LogContext
from iolens.ingest.importers.darshan_counters import counter_io
from iolens.ingest.importers.darshan_dxt import ClientRows, read_dxt
from iolens.ingest.importers.darshan_tables import (
    files_table,
    heatmap_metrics,
    job_row,
    log_row,
    module_rows,
    record_rows,
)
from iolens.ingest.importers.darshan_writer import GroupWriter, ParsedLog
from iolens.ingest.importers.identity import content_key
from iolens.ingest.uid_map import UidMap
from iolens.model.darshan import DarshanJob
from iolens.store.base import Store

#: What diagnoses a freshly read log: the codes whose older findings of that job it
#: replaces, and its findings as a FINDINGS table. Passed in by the caller (ingest does
#: not import the analyses).
Analyzer = Callable[[DarshanJob], tuple[Collection[str], pa.Table]]

_PID_IN_NAME = re.compile(r"_id\d+-(\d+)_")


def import_logs(
    store: Store,
    paths: Iterable[Path],
    *,
    dxt: bool = True,
    analyze: Analyzer | None = None,
    on_log: Callable[[ImportResult], None] | None = None,
    owners: UidMap | None = None,
) -> list[ImportResult]:
    """Import every log under `paths`; a bad log is one failed result, never the batch's end.

    `analyze` runs on each log as it is read; its findings are stored with the log. A log
    counts as imported once read (its group is written at most `GROUP_LOGS` later): store
    errors (disk full, locked database) are not about one log, they end the batch.
    `owners` names the account owning each log's job (`uid_map`; without it `uid:<N>`);
    given, it also re-owns the jobs of logs loaded before.
    """
    writer = GroupWriter(store)
    results: list[ImportResult] = []
    files = log_files(paths)
    keys: dict[Path, str] = {}  # content keys computed ahead
    with DecoderPool() as pool:
        for i, path in enumerate(files):
            nxt = files[i + 1] if i + 1 < len(files) else None

            def ahead(key: str, nxt: Path | None = nxt) -> None:
                _prefetch(store, pool, writer, key, nxt, dxt, keys)

            results.append(
                _import_one(store, pool, writer, path, dxt, analyze, keys, ahead, owners)
            )
            if on_log is not None:
                on_log(results[-1])
    writer.flush()
    if owners is not None:
        reown(store, [r.log_key for r in results if r.log_key and r.status != "failed"], owners)
    return results


def reown(store: Store, keys: list[str], owners: UidMap) -> int:
    """Give the jobs of the logs `keys` the owner `owners` names for their uid; only jobs
    whose row Darshan created (a scheduler's record keeps its owner). How many changed."""
    if not keys:
        return 0
    rows = store.query(
        "SELECT job_id, min(uid) AS uid FROM darshan_logs "
        "WHERE log_key IN (SELECT unnest(?)) GROUP BY job_id",
        [keys],
    ).to_pylist()
    table = pa.table(
        {
            "job_id": pa.array([r["job_id"] for r in rows], pa.string()),
            "owner": pa.array([owners.owner(int(r["uid"] or 0)) for r in rows], pa.string()),
        }
    )
    store.register("_iolens_owners", table)
    try:
        changed = store.query(
            "SELECT count(*) AS n FROM jobs j JOIN _iolens_owners o USING (job_id) "
            'WHERE j.source = ? AND j."user" IS DISTINCT FROM o.owner',
            [SOURCE],
        ).to_pylist()[0]["n"]
        if changed:
            with store.transaction():
                store.execute(
                    'UPDATE jobs SET "user" = o.owner FROM _iolens_owners o '
                    "WHERE jobs.job_id = o.job_id AND jobs.source = ?",
                    [SOURCE],
                )
    finally:
        store.unregister("_iolens_owners")
    return int(changed)


def _prefetch(
    store: Store,
    pool: DecoderPool,
    writer: GroupWriter,
    key: str,
    nxt: Path | None,
    dxt: bool,
    keys: dict[Path, str],
) -> None:
    """Hand the next log to the decoding worker while this one is stored, unless it will
    be skipped (already loaded, or the same content as this one)."""
    if nxt is None:
        return
    try:
        keys[nxt] = content_key(nxt, SOURCE)
    except InputError:
        return  # it fails in its turn
    if keys[nxt] != key and keys[nxt] not in writer.seen and not _known(store, keys[nxt]):
        pool.prefetch(nxt, dxt)


def _import_one(
    store: Store,
    pool: DecoderPool,
    writer: GroupWriter,
    path: Path,
    dxt: bool,
    analyze: Analyzer | None,
    keys: dict[Path, str],
    ahead: Callable[[str], None],
    owners: UidMap | None,
) -> ImportResult:
    t0 = time.perf_counter()
    res = ImportResult(path, "failed")
    try:
        res.log_key = keys.pop(path, None) or content_key(path, SOURCE)
        if res.log_key in writer.seen or _known(store, res.log_key):
            res.status = "skipped"
        else:
            writer.add(_read(pool, path, res, writer, dxt, analyze, ahead, owners), res)
    except InputError as exc:
        writer.abort()
        res.error = str(exc)
    except IolensError:
        raise  # the store, not this log
    except Exception as exc:  # a log libdarshan-util reads but makes no sense of
        writer.abort()
        res.error = f"{path}: could not be imported ({type(exc).__name__}: {exc})"
    res.seconds = time.perf_counter() - t0
    return res


def _known(store: Store, key: str) -> bool:
    return store.query("SELECT 1 FROM ingested WHERE key = ? LIMIT 1", [key]).num_rows > 0


def _read(
    pool: DecoderPool,
    path: Path,
    res: ImportResult,
    writer: GroupWriter,
    with_dxt: bool,
    analyze: Analyzer | None,
    ahead: Callable[[str], None],
    owners: UidMap | None,
) -> ParsedLog:
    try:
        log = pool.decode(path, with_dxt)  # libdarshan-util runs in the pool's worker
    finally:
        ahead(res.log_key or "")  # the next log decodes while this one is stored
    job = log.job
    res.job_id = job.job_id
    if not log.modules:
        raise InputError(str(path), EMPTY_LOG)
    extra = log.extra
    if analyze is not None:
        job.modules.update({name: block.data() for name, block in extra["blocks"].items()})
    res.partial = job.partial_modules
    ctx = LogContext(job, extra, _pid_of(path, job))
    client = ClientRows(writer.spill, res)
    read_dxt(log, ctx, with_dxt, client, res)
    counter = counter_io(ctx)
    if counter is not None:
        client.add(counter)
    key = res.log_key or ""
    records = record_rows(ctx, key)
    res.records = records.num_rows if records is not None else 0
    tables = {
        "client_io": client.tables,
        "metrics": _opt(heatmap_metrics(ctx)),
        "darshan_logs": [log_row(ctx, key, path)],
        "darshan_modules": _opt(module_rows(ctx, key)),
        "darshan_records": _opt(records),
    }
    findings = None
    if analyze is not None:
        try:
            codes, table = analyze(job)
            findings = (job.job_id, codes, table)
            res.findings = table.num_rows
        except Exception as exc:  # a rule's bug must not lose the log
            res.notes.append(f"diagnosis failed: {type(exc).__name__}: {exc}")
    owner = (owners or UidMap()).owner(job.uid)
    return ParsedLog(f"{SOURCE}:{path}", job_row(ctx, owner), files_table(ctx), tables, findings)


def _opt(t: pa.Table | None) -> list[pa.Table]:
    return [t] if t is not None and t.num_rows else []


def _pid_of(path: Path, job: DarshanJob) -> int | None:
    """A single-process log's pid from Darshan's file name (`..._id<job>-<pid>_...`): the
    logs of one job's separate processes must stay separate processes."""
    m = _PID_IN_NAME.search(path.name)
    return int(m.group(1)) if m and job.nprocs <= 1 else None


def summarize(results: list[ImportResult]) -> dict[str, Any]:
    """Totals of a batch, as `iolens import darshan --json` prints them."""
    done = [r for r in results if r.status == "imported"]
    return {
        "logs": len(results),
        "imported": len(done),
        "skipped": sum(r.status == "skipped" for r in results),
        "failed": sum(r.status == "failed" for r in results),
        "records": sum(r.records for r in done),
        "client_io": sum(r.client_io for r in done),
        "jobs": len({r.job_id for r in done}),
        "findings": sum(r.findings or 0 for r in done),
        "partial": [
            {"path": str(r.path), "modules": r.partial}
            for r in results
            if r.partial and r.status != "failed"
        ],
        "notes": [{"path": str(r.path), "note": n} for r in results for n in r.notes],
        "failures": [{"path": str(r.path), "error": r.error} for r in results if r.error],
    }
