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

Every log is keyed by a hash of its content: re-importing skips it. Small logs are written
in groups, one transaction each (per-statement costs dominate a small log); a log whose
DXT runs past `DXT_CHUNK` client rows gets a transaction of its own and streams them in
chunks, so memory stays bounded. A log that fails to parse leaves nothing behind. A log
without module data (Darshan was disabled, or the process did no I/O) is an error rather
than a job with no I/O: there is nothing to diagnose, and it usually means
instrumentation failed.
"""

from __future__ import annotations

import hashlib
import json
import pwd
import re
import time
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.errors import InputError, IolensError, reading
from iolens.ingest.darshan_merge import dxt_frame, merged_dxt
from iolens.ingest.darshan_reader import DarshanLog
from iolens.ingest.darshan_records import DXT_MODULES, Block
from iolens.model.darshan import DarshanJob
from iolens.model.ids import file_id
from iolens.model.schema import (
    CLIENT_IO,
    DARSHAN_LOGS,
    DARSHAN_MODULES,
    DARSHAN_RECORDS,
    FILES,
    JOBS,
    METRICS,
)
from iolens.store.base import Store

SOURCE = "darshan"
SUFFIX = ".darshan"
#: client rows of one log held before it switches to streaming them in its own transaction
DXT_CHUNK = 65_536
#: merged DXT runs kept in `DarshanJob.dxt` for the diagnosis; beyond it the job goes
#: without (`ImportResult.notes` says so) rather than holding an unbounded frame.
DXT_KEEP = 200_000
#: most client rows one log's shared records are spread into (see `_spread`)
SPREAD_ROWS = 262_144
#: logs, and rows, written per transaction
GROUP_LOGS = 64
GROUP_ROWS = 200_000

#: What diagnoses a freshly read log: the codes whose older findings of that job it
#: replaces, and its findings as a FINDINGS table. Passed in by the caller (ingest does
#: not import the analyses).
Analyzer = Callable[[DarshanJob], tuple[Collection[str], pa.Table]]


@dataclass(frozen=True)
class _Layer:
    """How a counter module's records become client_io rows."""

    name: str  # client_io.layer
    prefix: str  # counter prefix (MPIIO for the MPI-IO module)
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    md: dict[str, tuple[str, ...]]


LAYERS = {
    "POSIX": _Layer(
        "posix",
        "POSIX",
        ("READS",),
        ("WRITES",),
        {
            "open": ("OPENS",),
            "stat": ("STATS",),
            "seek": ("SEEKS",),
            "mmap": ("MMAPS",),
            "fsync": ("FSYNCS", "FDSYNCS"),
            "dup": ("DUPS",),
            "rename": ("RENAME_SOURCES",),
        },
    ),
    "STDIO": _Layer(
        "stdio",
        "STDIO",
        ("READS",),
        ("WRITES",),
        {"open": ("OPENS",), "seek": ("SEEKS",), "flush": ("FLUSHES",)},
    ),
    "MPI-IO": _Layer(
        "mpiio",
        "MPIIO",
        ("INDEP_READS", "COLL_READS", "SPLIT_READS", "NB_READS"),
        ("INDEP_WRITES", "COLL_WRITES", "SPLIT_WRITES", "NB_WRITES"),
        {"open": ("INDEP_OPENS", "COLL_OPENS"), "fsync": ("SYNCS",)},
    ),
    "DFS": _Layer(
        "dfs",
        "DFS",
        ("READS", "READXS"),
        ("WRITES", "WRITEXS"),
        {"open": ("OPENS",), "stat": ("LOOKUPS", "STATS", "GET_SIZES"), "unlink": ("REMOVES",)},
    ),
}
#: Modules whose record names are files (the rest name datasets, heatmaps, ranks...).
FILE_MODULES = ("POSIX", "STDIO", "MPI-IO", "H5F", "PNETCDF_FILE", "DFS")
_DXT_LAYER = {"DXT_POSIX": ("POSIX", "posix"), "DXT_MPIIO": ("MPI-IO", "mpiio")}
_PID_IN_NAME = re.compile(r"_id\d+-(\d+)_")
_EPOCH = datetime(1970, 1, 1)


@dataclass
class ImportResult:
    """What happened to one log file."""

    path: Path
    status: str  # imported | skipped | failed
    error: str | None = None
    log_key: str | None = None
    job_id: str | None = None
    records: int = 0  # darshan_records rows
    client_io: int = 0
    partial: list[str] = field(default_factory=list)  # modules Darshan marked incomplete
    findings: int | None = None  # None: no diagnosis ran
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def log_files(paths: Iterable[Path]) -> list[Path]:
    """Darshan logs under the given files or directories (recursively), in name order.

    A named file is taken whatever its suffix; a directory contributes its `*.darshan`
    files. Missing paths are kept, so they fail as one entry of the batch.
    """
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(x for x in p.rglob(f"*{SUFFIX}") if x.is_file())
        else:
            found.append(p)
    return found


def content_key(path: Path) -> str:
    """The log's identity: a hash of its bytes (the same log under two names loads once)."""
    h = hashlib.blake2b(digest_size=16)
    with reading(path), path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return f"{SOURCE}:{h.hexdigest()}"


def import_logs(
    store: Store,
    paths: Iterable[Path],
    *,
    dxt: bool = True,
    analyze: Analyzer | None = None,
    on_log: Callable[[ImportResult], None] | None = None,
) -> list[ImportResult]:
    """Import every log under `paths`; a bad log is one failed result, never the batch's end.

    `analyze` runs on each log as it is read; its findings are stored with the log. A log
    counts as imported once read (its group is written at most `GROUP_LOGS` later): store
    errors (disk full, locked database) are not about one log, they end the batch.
    """
    writer = _Writer(store)
    results: list[ImportResult] = []
    for path in log_files(paths):
        t0 = time.perf_counter()
        res = ImportResult(path, "failed")
        try:
            res.log_key = content_key(path)
            if res.log_key in writer.seen or _known(store, res.log_key):
                res.status = "skipped"
            else:
                writer.add(_read(path, res, writer, dxt, analyze), res)
        except InputError as exc:
            writer.abort()
            res.error = str(exc)
        except IolensError:
            raise  # the store, not this log
        except Exception as exc:  # a log libdarshan-util reads but makes no sense of
            writer.abort()
            res.error = f"{path}: could not be imported ({type(exc).__name__}: {exc})"
        res.seconds = time.perf_counter() - t0
        results.append(res)
        if on_log is not None:
            on_log(res)
    writer.flush()
    return results


def _known(store: Store, key: str) -> bool:
    return store.query("SELECT 1 FROM ingested WHERE key = ? LIMIT 1", [key]).num_rows > 0


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# -- writing --------------------------------------------------------------------------------


@dataclass
class _Parsed:
    """One log, read and turned into rows, waiting for its transaction."""

    source: str  # for `ingested`: darshan:PATH
    job_row: dict[str, Any]
    files: pa.Table | None
    tables: dict[str, list[pa.Table]]
    findings: tuple[str, Collection[str], pa.Table] | None  # job id, owned codes, rows

    def rows(self) -> int:
        return sum(t.num_rows for ts in self.tables.values() for t in ts)


class _Writer:
    """Group commit of small logs; a log that spills client rows streams in its own
    transaction (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.queue: list[tuple[_Parsed, ImportResult]] = []
        self.rows = 0
        self.seen: set[str] = set()  # keys queued or written in this batch
        self.own: AbstractContextManager[None] | None = None  # a spilling log's transaction
        self.started = _now()

    def spill(self, table: pa.Table) -> None:
        """Client rows of the log being read, before it is complete."""
        if self.own is None:
            self.flush()
            self.own = self.store.transaction()
            self.own.__enter__()
        self.store.append("client_io", table)

    def add(self, parsed: _Parsed, res: ImportResult) -> None:
        self.seen.add(res.log_key or "")
        if self.own is not None:  # it spilled: finish it alone, now
            own, self.own = self.own, None
            try:
                _write(self.store, [parsed], self.started)
            except BaseException as exc:
                own.__exit__(type(exc), exc, exc.__traceback__)
                raise
            own.__exit__(None, None, None)
            res.status = "imported"
            return
        res.status = "imported"
        self.queue.append((parsed, res))
        self.rows += parsed.rows()
        if len(self.queue) >= GROUP_LOGS or self.rows >= GROUP_ROWS:
            self.flush()

    def abort(self) -> None:
        """The log being read failed: drop what it spilled."""
        if self.own is not None:
            own, self.own = self.own, None
            exc = InputError("darshan", "aborted")
            own.__exit__(InputError, exc, None)

    def flush(self) -> None:
        if not self.queue:
            return
        with self.store.transaction():
            _write(self.store, [p for p, _ in self.queue], self.started)
        self.queue, self.rows = [], 0


def _write(store: Store, logs: list[_Parsed], started: datetime) -> None:
    """Everything of `logs`, inside the caller's transaction: one statement per table."""
    for name in ("client_io", "metrics", "darshan_logs", "darshan_modules", "darshan_records"):
        parts = [t for p in logs for t in p.tables.get(name, []) if t.num_rows]
        if parts:
            store.append(name, pa.concat_tables(parts))
    _merge_jobs(store, [p.job_row for p in logs])
    _merge_files(store, [p.files for p in logs if p.files is not None])
    found = [p.findings for p in logs if p.findings is not None]
    if found:
        _replace_findings(store, found, started)
    keys = [p.tables["darshan_logs"][0].column("log_key")[0].as_py() for p in logs]
    store.append(
        "ingested",
        pa.table(
            {
                "key": keys,
                "source": [p.source for p in logs],
                "rows": [p.rows() for p in logs],
                "loaded_at": [_now()] * len(keys),
            }
        ),
    )


def _combine(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Another source knew the job first: its fields stand, Darshan fills what it lacks.

    Two Darshan logs of one job (several executables in one allocation) widen each other:
    earliest start, latest end, most ranks, every host.
    """
    row = {k: old[k] if old.get(k) is not None else new[k] for k in new}
    if old.get("source") == SOURCE:
        row["start"] = min(t for t in (old["start"], new["start"]) if t is not None)
        row["end"] = max(t for t in (old["end"], new["end"]) if t is not None)
        row["nprocs"] = max(old["nprocs"] or 0, new["nprocs"] or 0)
        row["nodes"] = sorted(set(old["nodes"] or []) | set(new["nodes"] or [])) or None
    return row


def _merge_jobs(store: Store, rows: list[dict[str, Any]]) -> None:
    merged: dict[str, dict[str, Any]] = {}
    for r in rows:
        merged[r["job_id"]] = _combine(merged[r["job_id"]], r) if r["job_id"] in merged else r
    ids = pa.table({"job_id": pa.array(list(merged), pa.string())})
    store.register("_iolens_darshan_jobs", ids)
    try:
        old = store.query("SELECT j.* FROM jobs j JOIN _iolens_darshan_jobs USING (job_id)")
        if old.num_rows:
            store.execute(
                "DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM _iolens_darshan_jobs)"
            )
    finally:
        store.unregister("_iolens_darshan_jobs")
    for o in old.to_pylist():
        merged[o["job_id"]] = _combine(o, merged[o["job_id"]])
    store.append("jobs", pa.Table.from_pylist(list(merged.values()), schema=JOBS))


def _merge_files(store: Store, tables: list[pa.Table]) -> None:
    """Upsert by file id, keeping a layout another source knew when the log has none."""
    if not tables:
        return
    files = pa.concat_tables(tables)
    store.register("_iolens_darshan_files", files)
    try:
        merged = store.query(
            "SELECT n.file_id, any_value(n.path) AS path, "
            "coalesce(max(n.stripe_size), any_value(o.stripe_size)) AS stripe_size, "
            "coalesce(max(n.osts) FILTER (WHERE len(n.osts) > 0), any_value(o.osts), "
            "[]::VARCHAR[]) AS osts "
            "FROM _iolens_darshan_files n LEFT JOIN files o USING (file_id) GROUP BY n.file_id"
        )
        store.execute(
            "DELETE FROM files WHERE file_id IN (SELECT file_id FROM _iolens_darshan_files)"
        )
    finally:
        store.unregister("_iolens_darshan_files")
    store.append("files", merged)


def _replace_findings(
    store: Store, found: list[tuple[str, Collection[str], pa.Table]], started: datetime
) -> None:
    """Findings of the job from earlier runs with the diagnosis' codes go; those of other
    logs of the job imported in this batch stay (they are as new as these)."""
    pairs = [(job, code) for job, codes, _ in found for code in codes]
    if pairs:
        store.register(
            "_iolens_codes",
            pa.table({"job_id": [j for j, _ in pairs], "code": [c for _, c in pairs]}),
        )
        try:
            store.execute(
                "DELETE FROM findings WHERE subject_kind = 'job' AND created < ? AND EXISTS "
                "(SELECT 1 FROM _iolens_codes c WHERE c.job_id = subject_id "
                "AND c.code = findings.code)",
                [started],
            )
        finally:
            store.unregister("_iolens_codes")
    rows = [t for _, _, t in found if t.num_rows]
    if rows:
        store.append("findings", pa.concat_tables(rows))


# -- reading one log ----------------------------------------------------------------------


def _read(
    path: Path, res: ImportResult, writer: _Writer, with_dxt: bool, analyze: Analyzer | None
) -> _Parsed:
    with DarshanLog(path) as log:
        job = log.header_job()
        res.job_id = job.job_id
        if not log.modules:
            raise InputError(
                str(path),
                "empty Darshan log: no module data (Darshan recorded no I/O; instrumentation "
                "was disabled or failed)",
            )
        extra = log.read_static(job, frames=analyze is not None)
        res.partial = job.partial_modules
        ctx = _Context(job, extra, _pid_of(path, job))
        client = _Rows(writer, res)
        _dxt(log, ctx, with_dxt, client, res)
    counter = _counter_io(ctx)
    if counter is not None:
        client.add(counter)
    key = res.log_key or ""
    records = _record_rows(ctx, key)
    res.records = records.num_rows if records is not None else 0
    tables = {
        "client_io": client.tables,
        "metrics": _opt(_heatmap_metrics(ctx)),
        "darshan_logs": [_log_row(ctx, key, path)],
        "darshan_modules": _opt(_module_rows(ctx, key)),
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
    return _Parsed(f"{SOURCE}:{path}", _job_row(ctx), _files(ctx), tables, findings)


def _opt(t: pa.Table | None) -> list[pa.Table]:
    return [t] if t is not None and t.num_rows else []


def _pid_of(path: Path, job: DarshanJob) -> int | None:
    """A single-process log's pid from Darshan's file name (`..._id<job>-<pid>_...`): the
    logs of one job's separate processes must stay separate processes."""
    m = _PID_IN_NAME.search(path.name)
    return int(m.group(1)) if m and job.nprocs <= 1 else None


class _Context:
    """One log being imported: the job, its blocks and ids, and the choices every table
    shares."""

    def __init__(self, job: DarshanJob, extra: dict[str, Any], pid: int | None) -> None:
        self.job = job
        self.blocks: dict[str, Block] = extra["blocks"]
        self.heatmaps = extra["heatmaps"]
        self.autoperf: dict[str, dict[str, Any]] = extra["autoperf"]
        self.hosts: dict[int, str] = dict(extra["hosts"])  # rank -> host (APMPI, DXT)
        self.pid = pid
        self.t0_us = (job.start - _EPOCH) // timedelta(microseconds=1)
        self._fids: dict[int, int] = {}
        posix = self.blocks.get("POSIX")
        self.posix_ids = set(posix.ids.tolist()) if posix is not None else set()
        self.mpiio_data = _mpiio_owned(self.blocks)
        # (counter module, op) -> files whose data rows came from DXT
        self.dxt_cov: dict[tuple[str, str], set[int]] = {}

    def path(self, rid: int) -> str:
        return self.job.names.get(rid) or f"darshan-record:{rid:016x}"

    def fid(self, rid: int) -> int:
        f = self._fids.get(rid)
        if f is None:
            f = self._fids[rid] = file_id(self.path(rid))
        return f

    def ts(self, rel_s: np.ndarray) -> np.ndarray:
        rel = np.nan_to_num(np.clip(rel_s, 0, 1e9), posinf=1e9)  # garbage stays in range
        us = self.t0_us + np.rint(rel * 1e6).astype(np.int64)
        return us.astype("datetime64[us]")


class _Rows:
    """A log's client rows: held until `DXT_CHUNK`, then streamed (the log spills)."""

    def __init__(self, writer: _Writer, res: ImportResult) -> None:
        self.writer, self.res = writer, res
        self.tables: list[pa.Table] = []
        self.held = 0

    def add(self, table: pa.Table) -> None:
        self.res.client_io += table.num_rows
        self.tables.append(table)
        self.held += table.num_rows
        if self.held >= DXT_CHUNK:
            self.writer.spill(pa.concat_tables(self.tables))
            self.tables, self.held = [], 0


# -- DXT ------------------------------------------------------------------------------------


def _dxt(log: DarshanLog, ctx: _Context, with_dxt: bool, rows: _Rows, res: ImportResult) -> None:
    """Read DXT one file record at a time, merge, and hand the client rows to `rows`."""
    pending: list[dict[str, Any]] = []
    pending_n = 0
    kept: list[dict[str, Any]] | None = []
    kept_n = 0
    for module in DXT_MODULES:
        if module not in log.modules:
            continue
        info = ctx.job.module_info[module]
        if not with_dxt:
            info["records"] = None  # not read (--no-dxt)
            continue
        nrec = nseg = 0
        base, layer = _DXT_LAYER[module]
        nbytes: dict[tuple[int, str], int] = {}
        for rec in log.dxt(module):
            nrec += 1
            nseg += rec.writes + rec.reads
            if rec.hostname and rec.rank >= 0:
                ctx.hosts.setdefault(rec.rank, rec.hostname)
            for part in merged_dxt(rec):
                op = part["op"]
                # the layer that moved the file's bytes in that direction (see _mpiio_owned)
                emit = not info["partial"] and (rec.id in ctx.mpiio_data[op]) == (base == "MPI-IO")
                n = len(part["count"])
                if kept is not None:
                    if kept_n + n <= DXT_KEEP:
                        kept.append(part)
                        kept_n += n
                    else:
                        kept = None
                        res.notes.append(
                            f"more than {DXT_KEEP:,} merged DXT runs: the diagnosis sees the "
                            "counters only"
                        )
                if emit:
                    moved = int((part["size"] * part["count"]).sum())
                    nbytes[rec.id, op] = nbytes.get((rec.id, op), 0) + moved
                    ctx.dxt_cov.setdefault((base, op), set()).add(rec.id)
                    pending.append({**part, "layer": layer})
                    pending_n += n
                    if pending_n >= DXT_CHUNK:
                        rows.add(_dxt_rows(ctx, pending))
                        pending, pending_n = [], 0
        info["records"] = nrec
        info["segments"] = nseg
        _check_dxt(ctx, module, nbytes, res)
    if pending:
        rows.add(_dxt_rows(ctx, pending))
    ctx.job.dxt = dxt_frame(kept or [])


def _check_dxt(
    ctx: _Context, module: str, nbytes: dict[tuple[int, str], int], res: ImportResult
) -> None:
    """DXT stands in for the counters of the files it covers: say when they disagree."""
    block = ctx.blocks.get(_DXT_LAYER[module][0])
    if block is None or not nbytes:
        return
    pre = LAYERS[block.module].prefix
    for (rid, op), got in nbytes.items():
        sel = block.ids == np.uint64(rid)
        counter = block.col(f"{pre}_BYTES_{'READ' if op == 'read' else 'WRITTEN'}")
        want = int(np.clip(counter[sel], 0, None).sum())
        if sel.any() and want != got:
            res.notes.append(
                f"{module} has {got:,} bytes {op} for {ctx.path(rid)}, its counters {want:,}"
            )


def _mpiio_owned(blocks: dict[str, Block]) -> dict[str, set[int]]:
    """Per direction, the files whose bytes are counted from MPI-IO rather than POSIX.

    MPI-IO runs on top of POSIX, so POSIX normally sees every byte (more, with data
    sieving or collective buffering). When it saw fewer (ROMIO drivers that bypass the
    interposed calls, a POSIX module that ran out of records), MPI-IO is the better count.
    """
    out: dict[str, set[int]] = {"read": set(), "write": set()}
    mpi, posix = blocks.get("MPI-IO"), blocks.get("POSIX")
    if mpi is None:
        return out
    for op, what in (("read", "READ"), ("write", "WRITTEN")):
        seen: dict[int, int] = {}
        if posix is not None:
            for i, v in zip(
                posix.ids.tolist(), posix.col(f"POSIX_BYTES_{what}").tolist(), strict=True
            ):
                seen[i] = seen.get(i, 0) + max(v, 0)
        moved: dict[int, int] = {}
        for i, v in zip(mpi.ids.tolist(), mpi.col(f"MPIIO_BYTES_{what}").tolist(), strict=True):
            moved[i] = moved.get(i, 0) + max(v, 0)
        out[op] = {i for i, v in moved.items() if v > seen.get(i, 0)}
    return out


def _dxt_rows(ctx: _Context, parts: list[dict[str, Any]]) -> pa.Table:
    n = [len(p["count"]) for p in parts]
    total = sum(n)

    def tag(fn: Callable[[dict[str, Any]], Any], dtype: Any) -> np.ndarray:
        return np.repeat(np.array([fn(p) for p in parts], dtype=dtype), n)

    def runs(key: str) -> np.ndarray:
        return np.concatenate([p[key] for p in parts])

    start, end = runs("start"), runs("end")
    pid = (lambda p: ctx.pid) if ctx.pid is not None else (lambda p: p["rank"])
    return pa.table(
        {
            "job_id": pa.array([ctx.job.job_id] * total, pa.string()),
            "node": tag(lambda p: p["hostname"] or ctx.hosts.get(p["rank"], ""), object),
            "rank": tag(lambda p: p["rank"], np.int32),
            "pid": tag(pid, np.int32),
            "layer": tag(lambda p: p["layer"], object),
            "op": tag(lambda p: p["op"], object),
            "file_id": tag(lambda p: ctx.fid(int(p["id"])), np.int64),
            "offset": runs("offset"),
            "size": runs("size"),
            "stride": runs("stride"),
            "count": runs("count"),
            "t_start": ctx.ts(start),
            "t_end": ctx.ts(np.maximum(end, start)),
            "dur_ns": np.rint(np.nan_to_num(np.clip(runs("busy"), 0, 1e9)) * 1e9).astype(np.int64),
        },
        schema=CLIENT_IO,
    )


# -- counters -> client_io ----------------------------------------------------------------


def _counter_io(ctx: _Context) -> pa.Table | None:
    """Client records from the counters: each file's metadata at the lowest layer that
    saw it, its data where `_mpiio_owned` and DXT coverage say."""
    tables = []
    for module, layer in LAYERS.items():
        b = ctx.blocks.get(module)
        if b is None or not len(b):
            continue
        md_ok = np.ones(len(b), bool)
        data_ok = {op: np.ones(len(b), bool) for op in ("read", "write")}
        for op in data_ok:
            owned = _isin(b.ids, ctx.mpiio_data[op])
            if module == "POSIX":
                data_ok[op] = ~owned
            elif module == "MPI-IO":
                data_ok[op] = owned
            data_ok[op] &= ~_isin(b.ids, ctx.dxt_cov.get((module, op), set()))
        if module == "MPI-IO":  # opens of files POSIX saw are counted there
            md_ok = ~_isin(b.ids, ctx.posix_ids)
        t = _synthesize(ctx, layer, b, md_ok, data_ok)
        if t is not None:
            tables.append(t)
    return pa.concat_tables(tables) if tables else None


def _isin(ids: np.ndarray, values: set[int]) -> np.ndarray:
    return np.isin(ids, np.fromiter(values, np.uint64, len(values)))


def _synthesize(
    ctx: _Context, layer: _Layer, b: Block, md_ok: np.ndarray, data_ok: dict[str, np.ndarray]
) -> pa.Table | None:
    """Rows that reproduce each record's op counts and bytes exactly.

    Per record and op: `count - 1` ops of the mean size rounded down, plus one op with the
    rest of the bytes; shared records (rank -1: Darshan summed all ranks) are spread
    evenly over the job's ranks, as that is all the counters say. Times are the record's
    first-start / last-end timestamps of that kind of op; durations its cumulative
    read / write / metadata time, split in proportion to the op counts.
    """
    p = layer.prefix

    def col(name: str) -> np.ndarray:
        return np.clip(b.col(f"{p}_{name}"), 0, None)  # older formats use -1: unknown

    n = len(b)
    run_end = np.full(n, max(ctx.job.run_time, 0.0))
    last = np.max([col(f"F_{k}_END_TIMESTAMP") for k in ("OPEN", "READ", "WRITE", "CLOSE")], 0)

    def window(kind: str) -> tuple[np.ndarray, np.ndarray]:
        t0, t1 = col(f"F_{kind}_START_TIMESTAMP"), col(f"F_{kind}_END_TIMESTAMP")
        missing = (t0 <= 0) & (t1 <= 0)
        return np.where(missing, 0.0, t0), np.where(missing, run_end, np.maximum(t1, t0))

    ops, counts, nbytes, t0s, t1s, durs = [], [], [], [], [], []
    for op, names, what in (("read", layer.reads, "READ"), ("write", layer.writes, "WRITTEN")):
        kind = "READ" if op == "read" else "WRITE"
        t0, t1 = window(kind)
        ops.append(np.full(n, op))
        counts.append(np.sum([col(k) for k in names], axis=0) * data_ok[op])
        nbytes.append(col(f"BYTES_{what}") * data_ok[op])
        t0s.append(t0)
        t1s.append(t1)
        durs.append(col(f"F_{kind}_TIME"))
    md = {op: np.sum([col(k) for k in ks], axis=0) * md_ok for op, ks in layer.md.items()}
    md_total = np.sum(list(md.values()), axis=0)
    meta = col("F_META_TIME")
    open0, open1 = window("OPEN")
    for op, cnt in md.items():
        ops.append(np.full(n, op))
        counts.append(cnt)
        nbytes.append(np.zeros(n, np.int64))
        t0s.append(open0)
        t1s.append(open1 if op == "open" else np.where(last > 0, np.maximum(last, open1), run_end))
        durs.append(meta * np.divide(cnt, md_total, out=np.zeros(n), where=md_total > 0))
    k = len(ops)
    it = {
        "op": np.concatenate(ops),
        "count": np.concatenate(counts).astype(np.int64),
        "bytes": np.concatenate(nbytes).astype(np.int64),
        "t0": np.concatenate(t0s),
        "t1": np.concatenate(t1s),
        "dur": np.concatenate(durs),
        "rank": np.tile(b.ranks, k),
        "id": np.tile(b.ids, k),
    }
    live = (it["count"] > 0) | (it["bytes"] > 0)
    if not live.any():
        return None
    return _rows(ctx, layer.name, _spread(ctx, {name: v[live] for name, v in it.items()}))


def _spread(ctx: _Context, it: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One share per rank: shared records (rank -1) over min(nprocs, ops) ranks, and over
    fewer (evenly spaced) when a huge job has many shared files, so a log stays within
    `SPREAD_ROWS` shares."""
    nprocs = max(ctx.job.nprocs, 1)
    cnt = it["count"]
    shared = it["rank"] < 0
    k = np.where(shared, np.clip(cnt, 1, nprocs), 1)
    if k.sum() > SPREAD_ROWS:
        k = np.where(shared, np.minimum(k, max(1, SPREAD_ROWS // max(int(shared.sum()), 1))), 1)
    rep = np.repeat(np.arange(len(cnt)), k)
    j = np.arange(len(rep)) - np.repeat(np.cumsum(k) - k, k)
    kk = k[rep]
    c, b = cnt[rep], it["bytes"][rep]
    share_c = c // kk + (j < c % kk)
    share_b = b // kk + (j < b % kk)
    weight = np.divide(share_c, c, out=1.0 / kk, where=c > 0)
    out = {name: v[rep] for name, v in it.items()}
    out.update(
        rank=np.where(shared[rep], j * nprocs // kk, out["rank"]),
        count=share_c,
        bytes=share_b,
        dur=out["dur"] * weight,
    )
    return out


def _rows(ctx: _Context, layer: str, s: dict[str, np.ndarray]) -> pa.Table:
    """Shares -> rows: data ops as (count-1) x floor + 1 x remainder; metadata as is."""
    cnt, nbytes = s["count"], s["bytes"]
    data = (s["op"] == "read") | (s["op"] == "write")
    q = np.where(cnt > 0, nbytes // np.maximum(cnt, 1), nbytes)
    rest = nbytes - q * np.maximum(cnt - 1, 0)
    uniform = ~data | (cnt <= 1) | (rest == q)
    tail = ~uniform
    idx = np.r_[np.arange(len(cnt)), np.flatnonzero(tail)]
    count = np.r_[np.where(uniform, np.maximum(cnt, 1), cnt - 1), np.ones(int(tail.sum()), int)]
    size = np.r_[np.where(data, np.where(cnt <= 1, nbytes, q), 0), rest[tail]]
    frac = count / np.maximum(cnt[idx], 1)
    ranks = s["rank"][idx]
    nrows = len(idx)
    fids = {int(r): ctx.fid(int(r)) for r in np.unique(s["id"])}
    hosts = {int(r): ctx.hosts.get(int(r), "") for r in np.unique(ranks)}
    return pa.table(
        {
            "job_id": pa.array([ctx.job.job_id] * nrows, pa.string()),
            "node": np.array([hosts[int(r)] for r in ranks], object),
            "rank": ranks.astype(np.int32),
            "pid": (np.full(nrows, ctx.pid) if ctx.pid is not None else ranks).astype(np.int32),
            "layer": pa.array([layer] * nrows, pa.string()),
            "op": s["op"][idx].astype(object),
            "file_id": np.array([fids[int(r)] for r in s["id"][idx]], np.int64),
            "offset": np.full(nrows, -1, np.int64),
            "size": size.astype(np.int64),
            "stride": np.where(data[idx], size, 0).astype(np.int64),
            "count": count.astype(np.int64),
            "t_start": ctx.ts(s["t0"][idx]),
            "t_end": ctx.ts(np.maximum(s["t1"][idx], s["t0"][idx])),
            "dur_ns": np.rint(np.clip(s["dur"][idx] * frac, 0, None) * 1e9).astype(np.int64),
        },
        schema=CLIENT_IO,
    )


# -- jobs, files, heatmaps ----------------------------------------------------------------


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def _job_row(ctx: _Context) -> dict[str, Any]:
    job = ctx.job
    words = job.exe.split()
    end = job.start + timedelta(seconds=max(job.run_time, 0.0))
    return {
        "job_id": job.job_id,
        "user": _user(job.uid),
        "app": (Path(words[0]).name or None) if words else None,
        "nodes": sorted(set(ctx.hosts.values()) - {""}) or None,
        "nprocs": job.nprocs,
        "start": job.start,
        "end": max(end, job.end),
        "state": None,
        "source": SOURCE,
    }


def _files(ctx: _Context) -> pa.Table | None:
    ids: set[int] = set()
    for module in FILE_MODULES:
        if module in ctx.blocks:
            ids.update(ctx.blocks[module].ids.tolist())
    for files in ctx.dxt_cov.values():
        ids |= files
    layout: dict[int, tuple[int | None, list[str]]] = {}
    if ctx.job.lustre is not None:
        for rid, size, osts in zip(
            ctx.job.lustre["id"].tolist(),
            ctx.job.lustre["stripe_size"].tolist(),
            ctx.job.lustre["osts"].tolist(),
            strict=True,
        ):
            ids.add(int(rid))
            layout[int(rid)] = (int(size) or None, [f"OST{o:04x}" for o in osts if o >= 0])
    if not ids:
        return None
    order = sorted(ids)
    return pa.table(
        {
            "file_id": [ctx.fid(i) for i in order],
            "path": [ctx.path(i) for i in order],
            "stripe_size": [layout.get(i, (None, []))[0] for i in order],
            "osts": [layout.get(i, (None, []))[1] for i in order],
        },
        schema=FILES,
    )


def _heatmap_metrics(ctx: _Context) -> pa.Table | None:
    """HEATMAP bins summed over ranks: bytes/s per bin, one series per module and op."""
    sums: dict[tuple[str, str, int], float] = {}
    width: dict[tuple[str, str, int], float] = {}
    for h in ctx.heatmaps:
        if h.bin_width <= 0:
            continue
        for op, bins in (("read", h.read_bins), ("write", h.write_bins)):
            for i in np.flatnonzero(bins > 0).tolist():
                # bins are aligned to the job start: key by the bin's end, in microseconds
                key = (h.module, op, round((i + 1) * h.bin_width * 1e6))
                sums[key] = sums.get(key, 0.0) + float(bins[i])
                width[key] = h.bin_width
    if not sums:
        return None
    keys = sorted(sums)
    return pa.table(
        {
            "ts": np.array([ctx.t0_us + k[2] for k in keys]).astype("datetime64[us]"),
            "interval_s": [width[k] for k in keys],
            "kind": ["compute"] * len(keys),
            "component_id": [f"darshan:{ctx.job.job_id}"] * len(keys),
            "job_id": [ctx.job.job_id] * len(keys),
            "metric": [f"darshan_{k[0].lower()}_{k[1]}_bytes" for k in keys],
            "value": [sums[k] / width[k] for k in keys],
        },
        schema=METRICS,
    )


# -- the log itself ---------------------------------------------------------------------


def _log_row(ctx: _Context, key: str, path: Path) -> pa.Table:
    job = ctx.job
    modules = {name: dict(info) for name, info in job.module_info.items()}
    for name, header in ctx.autoperf.items():
        modules[name]["header"] = header
    row = {
        "job_id": job.job_id,
        "log_key": key,
        "path": str(path.resolve()),
        "log_version": job.log_version,
        "lib_version": job.lib_version,
        "exe": job.exe,
        "uid": job.uid,
        "nprocs": job.nprocs,
        "start": job.start,
        "end": job.end,
        "run_time_s": job.run_time,
        "metadata": json.dumps(job.metadata, sort_keys=True),
        "mounts": json.dumps([list(m) for m in job.mounts]),
        "modules": json.dumps(modules, sort_keys=True),
        "imported": _now(),
    }
    return pa.Table.from_pylist([row], schema=DARSHAN_LOGS)


def _module_rows(ctx: _Context, key: str) -> pa.Table | None:
    rows = [
        {
            "log_key": key,
            "module": name,
            "version": b.version,
            "partial": b.partial,
            "counter_names": b.cnames,
            "fcounter_names": b.fnames,
        }
        for name, b in ctx.blocks.items()
    ]
    return pa.Table.from_pylist(rows, schema=DARSHAN_MODULES) if rows else None


def _lists(block: np.ndarray, dtype: pa.DataType) -> pa.Array:
    n, width = block.shape
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * width)
    return pa.ListArray.from_arrays(offsets, pa.array(block.reshape(-1), dtype))


def _record_rows(ctx: _Context, key: str) -> pa.Table | None:
    tables = []
    for name, b in ctx.blocks.items():
        if not len(b):
            continue
        names = ctx.job.names
        tables.append(
            pa.table(
                {
                    "log_key": pa.array([key] * len(b), pa.string()),
                    "module": pa.array([name] * len(b), pa.string()),
                    "record_id": b.ids.view(np.int64),
                    "rank": b.ranks.astype(np.int32),
                    "path": pa.array([names.get(i) for i in b.ids.tolist()], pa.string()),
                    "counters": _lists(b.c, pa.int64()),
                    "fcounters": _lists(b.f, pa.float64()),
                },
                schema=DARSHAN_RECORDS,
            )
        )
    return pa.concat_tables(tables) if tables else None


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
