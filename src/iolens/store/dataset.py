"""The scale-out store: a partitioned Parquet dataset read through DuckDB.

Layout under the dataset root (`docs/scale-out.md` has the full story):

```
iolens-dataset.json                          marker (format version)
<table>/date=YYYY-MM-DD/hour=HH/group=G/*.parquet   immutable segments
client_io_merged/date=.../hour=.../group=_compacted/*.parquet   second-pass client records
_staging/<group>/                            segments being written (invisible)
_commits/<group>/<commit>.json               ingest commit manifests (roll-forward log)
_compactions/<id>.json                       compaction manifests (inputs -> outputs)
_results/HEAD.json, _results/<table>-<v>.parquet   analysis results, one snapshot per table
_locks/                                      one writer per group, one results writer, one compactor
```

Ingest servers (`iolens.store.segments`) write the ingest tables (client records, server
samples, metrics, jobs, files, topology, batch keys) as segments of their own group; the
query/analysis server reads them all through `DatasetStore`, whose SQL views have the
model's table names, so `iolens.store.queries` and every analysis run unchanged.

Visibility without a coordinator: writers stage files, write their manifest (the commit
point), then rename each staged file into its partition; a compaction's inputs (and any
manifest) are deleted only after a grace period. A reader lists the manifest names, then
the staging area, then the segment files, then reads the manifests: a commit whose
manifest it had not seen yet, or whose files are still staged, may be half renamed, so
its outputs are hidden (until the next listing); a finished compaction hides its inputs.
A reader thus sees each row exactly once, and a commit all at once or not at all.

Analysis results (findings, summaries, anomalies, ...) are small and rewritten by the
analyses, so they live in DuckDB tables in memory, loaded from `_results/` and published
back (one Parquet file per changed table, then `HEAD.json` atomically) when a write
commits. One process at a time publishes (the results lock): the analysis server.

The pieces: `dataset_layout.py` (paths, atomic writes, locks), `visibility.py` (manifests
and what a reader sees), `segment_views.py` (segments as the model's tables),
`site_config.py` (`site.toml`); this module is the store over them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from iolens.errors import StoreError
from iolens.model.schema import TABLES
from iolens.store.dataset_layout import (
    INGEST_TABLES,
    MARKER,
    MERGED,
    FileLock,
    atomic_write,
    init_dataset,
    is_dataset,
)
from iolens.store.duckdb_store import arrow_query, first_line
from iolens.store.migrations import LATEST, MIGRATIONS
from iolens.store.segment_views import columns_sql, view_sql
from iolens.store.visibility import ManifestCache, Snapshot, read_head, take_snapshot

_WRITE_RE = re.compile(
    r"^\s*(?:DELETE\s+FROM|INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|ALTER\s+TABLE|TRUNCATE)"
    r"\s+\"?(\w+)\"?",
    re.IGNORECASE,
)


class DatasetStore:
    """The Store protocol over a dataset: segment views plus in-memory result tables.

    `snapshot` pins the files (a Dask task gets the slice of partitions it needs);
    otherwise the listing is refreshed at most every `refresh_s` seconds between queries.
    `journal=True` records every write instead of publishing it (workers of a distributed
    analysis hand the journal back to the process that owns the results).
    """

    #: the tables the ingest servers own; the analysis widens trace-only jobs beside them
    read_only_tables = INGEST_TABLES

    def __init__(
        self,
        root: str | Path,
        *,
        create: bool = False,
        read_only: bool = False,
        snapshot: Snapshot | None = None,
        journal: bool = False,
        refresh_s: float = 5.0,
        threads: int | None = None,
    ) -> None:
        self.root = Path(root)
        self.location = str(self.root)
        if not is_dataset(self.root):
            if not create:
                raise StoreError(f"{self.root} is not an iolens dataset (no {MARKER})")
            init_dataset(self.root)
        self.refresh_s = refresh_s
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET enable_progress_bar = false")  # servers and Dask workers
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        for _number, sql in MIGRATIONS:
            self.con.execute(sql)
        self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(LATEST)])
        # Every table the migrations create that ingest servers do not write (the model's
        # result tables, meta, and whatever later migrations add, e.g. web users).
        made = self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
        self._results = sorted(t for (t,) in made if t not in INGEST_TABLES)
        self._cache = ManifestCache()
        self._fixed = snapshot is not None
        self._snapshot = snapshot or take_snapshot(self.root, self._cache)
        self._views: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._wrote = False
        self._in_tx = False
        self.journal: list[tuple[Any, ...]] | None = [] if journal else None
        self._lock = FileLock(self.root / "_locks" / "results.lock")
        self.publishing = not read_only and not journal and self._lock.acquire()
        self._head_version = -1
        self._lazy: dict[str, str] = {}  # result table -> snapshot file it still reads
        self._copied: set[str] = set()  # result tables in memory (written here)
        self._load_results(self._snapshot.results)
        self._make_views()

    # -- results -----------------------------------------------------------------------
    def _load_results(self, head: dict[str, Any]) -> None:
        """Result tables read their published snapshot through a view until this process
        first writes them (then they are copied into memory): a task that only reads a
        few findings never loads every table."""
        if head.get("schema_version", 0) > LATEST:
            raise StoreError(
                f"{self.root} has results of schema version {head['schema_version']}; this "
                f"iolens knows up to {LATEST}. Upgrade iolens."
            )
        for table, name in head.get("tables", {}).items():
            if table not in self._results or table in self._copied or self._lazy.get(table) == name:
                continue
            path = str(self.root / "_results" / name).replace("'", "''")
            self.con.execute(
                f'CREATE OR REPLACE TEMP VIEW "{table}" AS SELECT * FROM memory.main."{table}" '
                f"UNION ALL BY NAME SELECT * FROM read_parquet('{path}')"
            )
            self._lazy[table] = name
        self._head_version = int(head.get("version", 0))

    def _materialize(self, table: str) -> None:
        self._copied.add(table)
        name = self._lazy.pop(table, None)
        if name is None:
            return
        path = str(self.root / "_results" / name).replace("'", "''")
        self.con.execute(f'DROP VIEW temp."{table}"')
        self.con.execute(
            f"INSERT INTO memory.main.\"{table}\" BY NAME SELECT * FROM read_parquet('{path}')"
        )

    def publish(self) -> None:
        """Write changed result tables and a new HEAD (the results writer only)."""
        if not self._dirty or not self.publishing:
            return
        head = read_head(self.root)
        version = int(head.get("version", 0)) + 1
        tables = dict(head.get("tables", {}))
        out = self.root / "_results"
        for table in sorted(self._dirty):
            name = f"{table}-{version:08d}.parquet"
            tmp = out / f".{name}.tmp"
            self.con.execute(
                f"COPY (SELECT * FROM memory.main.\"{table}\") TO '{tmp}' "
                "(FORMAT parquet, COMPRESSION zstd)"
            )
            os.rename(tmp, out / name)
            tables[table] = name
        atomic_write(
            out / "HEAD.json",
            json.dumps(
                {"version": version, "schema_version": LATEST, "tables": tables},
                sort_keys=True,
            ),
        )
        self._dirty.clear()
        self._head_version = version
        self._cleanup_results(set(tables.values()))

    def _cleanup_results(self, keep: set[str], grace_s: float = 600.0) -> None:
        now = time.time()
        for p in (self.root / "_results").glob("*.parquet"):
            if p.name not in keep:
                with contextlib.suppress(OSError):
                    if now - p.stat().st_mtime > grace_s:
                        p.unlink()

    # -- listing -----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The files and results head this store reads (publish first to include writes)."""
        self.publish()
        snap = self._snapshot
        return Snapshot(snap.root, snap.files, read_head(self.root), snap.taken)

    def refresh(self, force: bool = True) -> None:
        """Pick up new segments (and, unless this process writes results, new results)."""
        if self._fixed or self._in_tx:
            return
        if not force and time.time() - self._snapshot.taken < self.refresh_s:
            return
        snap = take_snapshot(self.root, self._cache)
        if snap.files != self._snapshot.files:
            self._snapshot = snap
            self._make_views()
        else:
            self._snapshot.taken = snap.taken
        if (
            not self.publishing
            and not self._wrote
            and snap.results.get("version", 0) > max(0, self._head_version)
        ):
            self._load_results(snap.results)

    def _make_views(self) -> None:
        files = self._snapshot.files
        for table in INGEST_TABLES:
            sql = view_sql(table, self.root, files.get(table, []), files.get(MERGED, []))
            if not sql:
                empty = f"_iolens_empty_{table}"
                self.con.register(empty, TABLES[table].empty_table())
                sql = f"SELECT {columns_sql(table)} FROM {empty}"
            jobs = self._snapshot.jobs
            if jobs is not None and table in ("client_io", "server_samples"):
                quoted = ", ".join("'" + j.replace("'", "''") + "'" for j in jobs) or "NULL"
                sql = f"SELECT * FROM ({sql}) WHERE job_id IN ({quoted})"
            if self._views.get(table) != sql:
                self.con.execute(f'CREATE OR REPLACE TEMP VIEW "{table}" AS {sql}')
                self._views[table] = sql

    # -- Store protocol ----------------------------------------------------------------
    def append(self, table: str, data: pa.Table) -> int:
        schema = TABLES.get(table)
        if schema is None:
            raise ValueError(f"unknown table {table!r}")
        if table in INGEST_TABLES:
            raise StoreError(
                f"{self.root}: {table} is written by the ingest servers (iolens serve --group)"
            )
        if data.num_rows == 0:
            return 0
        data = data.select(schema.names).cast(schema)
        self._materialize(table)
        self.con.register("_iolens_append", data)
        try:
            self.con.execute(
                f'INSERT INTO memory.main."{table}" BY NAME SELECT * FROM _iolens_append'
            )
        finally:
            self.con.unregister("_iolens_append")
        self._note(table)
        if self.journal is not None:
            self.journal.append(("append", table, data))
        return data.num_rows

    def query(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        self.refresh(force=False)
        return arrow_query(self.con, sql, params, str(self.root))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        m = _WRITE_RE.match(sql)
        if m and m.group(1) in INGEST_TABLES:
            raise StoreError(f"{self.root}: {m.group(1)} is read-only here (ingest servers own it)")
        if m:
            self._materialize(m.group(1))
        try:
            self.con.execute(sql, list(params))
        except duckdb.Error as exc:
            raise StoreError(f"{self.root}: {first_line(exc)}") from exc
        if m:
            self._note(m.group(1))
        if self.journal is not None:
            self.journal.append(("execute", sql, list(params)))

    def _note(self, table: str) -> None:
        self._dirty.add(table)
        self._wrote = True
        if not self._in_tx:
            self.publish()

    def register(self, name: str, data: pa.Table) -> None:
        self.con.register(name, data)
        if self.journal is not None:
            self.journal.append(("register", name, data))

    def unregister(self, name: str) -> None:
        self.con.unregister(name)
        if self.journal is not None:
            self.journal.append(("unregister", name))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        mark = len(self.journal) if self.journal is not None else 0
        self.con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        if self.journal is not None:
            self.journal.append(("begin",))
        try:
            yield
        except BaseException:
            self._in_tx = False
            self.con.execute("ROLLBACK")
            if self.journal is not None:
                del self.journal[mark:]  # nothing of a rolled-back block is replayed
            raise
        self._in_tx = False
        self.con.execute("COMMIT")
        if self.journal is not None:
            self.journal.append(("commit",))
        self.publish()

    def close(self) -> None:
        try:
            self.publish()
        finally:
            self._lock.release()
            self.con.close()

    def __enter__(self) -> DatasetStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replay(journal: list[tuple[Any, ...]], store: Any) -> None:
    """Apply the writes a journaling store recorded, in order, to `store`."""
    stack: list[contextlib.AbstractContextManager[None]] = []
    for entry in journal:
        op = entry[0]
        if op == "begin":
            tx = store.transaction()
            tx.__enter__()
            stack.append(tx)
        elif op == "commit":
            stack.pop().__exit__(None, None, None)
        elif op == "append":
            store.append(entry[1], entry[2])
        elif op == "execute":
            store.execute(entry[1], entry[2])
        elif op == "register":
            store.register(entry[1], entry[2])
        elif op == "unregister":
            store.unregister(entry[1])
    if stack:
        raise StoreError("journal ends inside a transaction")
