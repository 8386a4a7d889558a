"""Where data lives: the store interface, its backends and the shared queries."""

from iolens.store.base import Store
from iolens.store.duckdb_store import DuckDBStore, default_db_path


def open_store(path: str | None = None, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the configured store: the embedded DuckDB file, or a scale-out dataset when
    `path` (`--db`, `$IOLENS_DB`) is a dataset directory (`iolens.store.dataset`)."""
    from iolens.store.dataset import DatasetStore
    from iolens.store.dataset_layout import is_dataset

    target = path or default_db_path()
    if is_dataset(target):
        return DatasetStore(target, read_only=read_only)
    return DuckDBStore(target, create=create, read_only=read_only)


__all__ = ["DuckDBStore", "Store", "default_db_path", "open_store"]
