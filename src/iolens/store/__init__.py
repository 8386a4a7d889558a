"""Where data lives: the store interface, its backends and the shared queries.

The backends load on first use (PEP 562): the node agent reads the site config
(`store/site_config.py`) on the light install, which has no DuckDB or pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iolens.store.base import Store
    from iolens.store.duckdb_store import DuckDBStore, default_db_path


def open_store(path: str | None = None, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the configured store: the embedded DuckDB file, or a scale-out dataset when
    `path` (`--db`, `$IOLENS_DB`) is a dataset directory (`iolens.store.dataset`)."""
    from iolens.store.dataset import DatasetStore
    from iolens.store.dataset_layout import is_dataset
    from iolens.store.duckdb_store import DuckDBStore, default_db_path

    target = path or default_db_path()
    if is_dataset(target):
        return DatasetStore(target, read_only=read_only)
    return DuckDBStore(target, create=create, read_only=read_only)


def __getattr__(name: str) -> Any:
    if name == "Store":
        from iolens.store.base import Store

        return Store
    if name in ("DuckDBStore", "default_db_path"):
        from iolens.store import duckdb_store

        return getattr(duckdb_store, name)
    raise AttributeError(f"module 'iolens.store' has no attribute {name!r}")


__all__ = ["DuckDBStore", "Store", "default_db_path", "open_store"]
