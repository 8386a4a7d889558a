"""The default embedded store: one DuckDB file.

Appends go through Arrow (DuckDB scans the Arrow buffers directly), never row-by-row
INSERTs: that is what keeps ingest above a million client records per second per core.
Only DuckDB's built-in features are used, so nothing is downloaded at run time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from iolens.errors import StoreError
from iolens.model.schema import TABLES
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


class DuckDBStore:
    """A single-file DuckDB store with migrations applied on open."""

    def __init__(self, path: str | Path, *, create: bool = True, read_only: bool = False) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        if not self.path.exists():
            if not create:
                raise StoreError(
                    f"no iolens database at {self.path} "
                    "(run `iolens demo` or `iolens simulate`, or pass --db / set IOLENS_DB)"
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not an iolens database file")
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only and self.path.exists())
        except duckdb.IOException as exc:
            locked = _LOCK_HOLDER.search(str(exc))
            if locked:
                raise StoreLocked(self.path, locked.group(1), int(locked.group(2))) from None
            raise StoreError(f"cannot open {self.path}: {first_line(exc)}") from None
        except duckdb.Error as exc:
            raise StoreError(
                f"{self.path} is not a usable DuckDB file: {first_line(exc)}"
            ) from None
        self._migrate(read_only)

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
            raise StoreError(f"{self.path}: {first_line(exc)}") from exc

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
        raise StoreError(f"{where}: {first_line(exc)}") from exc


def first_line(exc: BaseException) -> str:
    """DuckDB's message without its context lines (or the error's type)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
