"""Writing imported Darshan logs: small logs in groups of one transaction each, a log that
spills client rows in a transaction of its own; jobs, files and findings merged with what
the store already knows."""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from iolens.errors import InputError
from iolens.ingest.importers.darshan_context import SOURCE, ImportResult, now
from iolens.model.schema import JOBS
from iolens.store.base import Store

#: logs, and rows, written per transaction
GROUP_LOGS = 64

GROUP_ROWS = 200_000


@dataclass
class ParsedLog:
    """One log, read and turned into rows, waiting for its transaction."""

    source: str  # for `ingested`: darshan:PATH
    job_row: dict[str, Any]
    files: pa.Table | None
    tables: dict[str, list[pa.Table]]
    findings: tuple[str, Collection[str], pa.Table] | None  # job id, owned codes, rows

    def rows(self) -> int:
        return sum(t.num_rows for ts in self.tables.values() for t in ts)


class GroupWriter:
    """Group commit of small logs; a log that spills client rows streams in its own
    transaction (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.queue: list[tuple[ParsedLog, ImportResult]] = []
        self.rows = 0
        self.seen: set[str] = set()  # keys queued or written in this batch
        self.own: AbstractContextManager[None] | None = None  # a spilling log's transaction
        self.started = now()

    def spill(self, table: pa.Table) -> None:
        """Client rows of the log being read, before it is complete."""
        if self.own is None:
            self.flush()
            self.own = self.store.transaction()
            self.own.__enter__()
        self.store.append("client_io", table)

    def add(self, parsed: ParsedLog, res: ImportResult) -> None:
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


def _write(store: Store, logs: list[ParsedLog], started: datetime) -> None:
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
                "loaded_at": [now()] * len(keys),
            }
        ),
    )


def combine_jobs(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
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
        merged[r["job_id"]] = combine_jobs(merged[r["job_id"]], r) if r["job_id"] in merged else r
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
        merged[o["job_id"]] = combine_jobs(o, merged[o["job_id"]])
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
