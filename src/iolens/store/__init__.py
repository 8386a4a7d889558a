"""Where data lives: the store interface, its backends and the shared queries."""

from iolens.store.base import Store
from iolens.store.duckdb_store import DuckDBStore, default_db_path


def open_store(path: str | None = None, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the configured store (today: the embedded DuckDB file)."""
    return DuckDBStore(path or default_db_path(), create=create, read_only=read_only)


__all__ = ["DuckDBStore", "Store", "default_db_path", "open_store"]
