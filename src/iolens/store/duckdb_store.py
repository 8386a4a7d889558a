"""The default embedded store: one DuckDB file.

Appends go through Arrow (DuckDB scans the Arrow buffers directly), never row-by-row
INSERTs: that is what keeps ingest above a million client records per second per core.
Only DuckDB's built-in features are used, so nothing is downloaded at run time.

The file holds every user's jobs, so it and its WAL are private to their owner (0600, a
new parent directory 0700). A file DuckDB cannot read (truncated, a zeroed block) is one
error naming it as damaged. When DuckDB invalidates the database after a fatal error (a
checkpoint on a full disk), `reopen_if_invalidated()` closes and reopens it once it can be.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from iolens.errors import StoreError
from iolens.model.schema import TABLES
from iolens.store.faults import DamagedStore, is_invalidated
from iolens.store.migrations import LATEST, MIGRATIONS

DEFAULT_DB = Path.home() / ".local" / "share" / "iolens" / "iolens.duckdb"


#: DuckDB's words when another process holds the file: 'Conflicting lock is held in EXE (PID N)'.
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


class StoreLocked(StoreError):
    """Another process (often `iolens serve`) holds the file: DuckDB admits one at a time."""

    def __init__(self, path: Path, program: str, pid: int) -> None:
        self.path, self.program, self.pid = path, program, pid
        super().__init__(f"{path} is locked by another process (PID {pid}, {program})")


def default_db_path() -> Path:
    """`$IOLENS_DB` if set, else the per-user default under ~/.local/share."""
    env = os.environ.get("IOLENS_DB")
    return Path(env) if env else DEFAULT_DB


def private_umask() -> None:
    """Files this process creates from now on get no group or other permissions.

    DuckDB creates the WAL (deleted at each checkpoint, created again at the next write)
    with the process's umask, and no DuckDB option sets its mode: a process that writes a
    store keeps its files private this way. Files meant to be shared are chmod'ed
    explicitly where they are written (`present.discovery`)."""
    current = os.umask(0o077)
    os.umask(current | 0o077)


#: DuckDB's words for a file it cannot read as a database.
_DAMAGE = ("Corrupt database file", "Could not read enough bytes", "checksum", "not a valid")


class DuckDBStore:
    """A single-file DuckDB store with migrations applied on open."""

    def __init__(self, path: str | Path, *, create: bool = True, read_only: bool = False) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.read_only = read_only
        self.generation = 0  # how many times reopen_if_invalidated() reopened the file
        self._broken = False  # closed after an invalidation, not reopened yet
        self._probe_lock = threading.Lock()
        if not self.path.exists():
            if not create:
                raise StoreError(
                    f"no iolens database at {self.path} "
                    "(run `iolens demo` or `iolens simulate`, or pass --db / set IOLENS_DB)"
                )
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not an iolens database file")
        if not read_only:
            private_umask()
        self._open()

    def _open(self) -> None:
        read_only = self.read_only and self.path.exists()
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            locked = _LOCK_HOLDER.search(str(exc))
            if locked:
                raise StoreLocked(self.path, locked.group(1), int(locked.group(2))) from None
            raise self._unusable(exc, "cannot open") from None
        except duckdb.Error as exc:
            raise self._unusable(exc, "cannot open") from None
        try:
            self._migrate(self.read_only)
        except duckdb.Error as exc:
            self.con.close()
            raise self._unusable(exc, "cannot read") from None
        self._probe = self.con.cursor()

    def _unusable(self, exc: duckdb.Error, doing: str) -> StoreError:
        reason = first_line(exc)
        if any(words in reason for words in _DAMAGE):
            return DamagedStore(self.path, reason)
        return StoreError(f"{doing} {self.path}: {reason}")

    # -- health -------------------------------------------------------------------------
    def check(self) -> None:
        """A cheap SELECT of the store's own catalog; StoreError with DuckDB's reason when
        it cannot answer (an invalidated database, a closed one)."""
        with self._probe_lock:
            try:
                self._probe.execute("SELECT value FROM meta WHERE key = 'schema_version'")
                self._probe.fetchall()
            except duckdb.Error as exc:
                raise StoreError(f"{self.path}: {first_line(exc)}") from exc

    def reopen_if_invalidated(self) -> bool:
        """Close and reopen the file when DuckDB invalidated it; True when it reopened.

        Reopening replays the WAL, so every committed batch is there. When it cannot be
        reopened yet (the disk is still full) the StoreError says why; call again later."""
        if not self._broken:
            try:
                self.check()
                return False
            except StoreError as exc:
                if not is_invalidated(exc):
                    raise
            self._broken = True
            with self._probe_lock:
                self.con.close()  # the cursors too: DuckDB frees the instance with the last
        with self._probe_lock:
            self._open()
            self._broken = False
            self.generation += 1
        return True

    # -- schema -------------------------------------------------------------------------
    def _migrate(self, read_only: bool) -> None:
        version = self.schema_version()
        if version > LATEST:
            raise StoreError(
                f"{self.path} has schema version {version}; this iolens knows up to {LATEST}. "
                "Upgrade iolens."
            )
        if version == LATEST:
            return
        if read_only:
            raise StoreError(f"{self.path} needs a schema migration; open it writable once")
        if version == 0 and self._user_tables() - {"meta"}:
            raise StoreError(f"{self.path} is a DuckDB file but not an iolens database")
        with self.transaction():
            self.con.execute(
                "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)"
            )
            for number, sql in MIGRATIONS:
                if number > version:
                    self.con.execute(sql)
            self.con.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(LATEST)]
            )

    def _user_tables(self) -> set[str]:
        rows = self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
        return {r[0] for r in rows}

    def schema_version(self) -> int:
        if "meta" not in self._user_tables():
            return 0
        rows = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        return int(rows[0][0]) if rows else 0

    # -- data ---------------------------------------------------------------------------
    def append(self, table: str, data: pa.Table) -> int:
        schema = TABLES.get(table)
        if schema is None:
            raise ValueError(f"unknown table {table!r}")
        if data.num_rows == 0:
            return 0
        data = data.select(schema.names).cast(schema)
        self.con.register("_iolens_append", data)
        try:
            self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _iolens_append")
        finally:
            self.con.unregister("_iolens_append")
        return data.num_rows

    def query(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        return arrow_query(self.con, sql, params, self.location)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        try:
            self.con.execute(sql, list(params))
        except duckdb.Error as exc:
            reason = first_line(exc)
            if any(words in reason for words in _DAMAGE):
                raise DamagedStore(self.path, reason) from exc
            raise StoreError(f"{self.path}: {reason}") from exc

    def register(self, name: str, data: pa.Table) -> None:
        self.con.register(name, data)

    def unregister(self, name: str) -> None:
        self.con.unregister(name)

    def transaction(self) -> _Transaction:
        return _Transaction(self.con)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Transaction:
    """BEGIN/COMMIT around a block, ROLLBACK on error, so a failed ingest leaves no half batch."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def __enter__(self) -> None:
        self.con.execute("BEGIN TRANSACTION")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.con.execute("ROLLBACK" if exc_type else "COMMIT")


def arrow_query(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any], where: str
) -> pa.Table:
    """`sql`'s result as Arrow; StoreError naming `where` and DuckDB's first line."""
    try:
        relation = con.sql(sql, params=list(params) or None)
        if relation is None:
            return pa.table({})
        # DuckDB 2 renamed arrow() to to_arrow_table().
        fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
        return fetch()
    except duckdb.Error as exc:
        reason = first_line(exc)
        if any(words in reason for words in _DAMAGE):  # a block read only now
            raise DamagedStore(Path(where), reason) from exc
        raise StoreError(f"{where}: {reason}") from exc


def first_line(exc: BaseException) -> str:
    """DuckDB's message without its context lines (or the error's type)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
