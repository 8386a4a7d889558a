"""The store interface every backend implements.

It is deliberately thin: bulk appends of Arrow tables and SQL queries returning Arrow.
Analyses go through `iolens.store.queries`, whose SQL is plain DuckDB dialect, so a
scale-out backend (DuckDB over a partitioned Parquet dataset) can serve them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

import pyarrow as pa


class Store(Protocol):
    """Where iolens keeps its data."""

    location: str

    def append(self, table: str, data: pa.Table) -> int:
        """Append rows (cast to the model schema of `table`); returns the row count."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        """Run a read-only SQL query and return its result as Arrow."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement that changes data (deletes before a re-analysis, for example)."""
        ...

    def register(self, name: str, data: pa.Table) -> None:
        """Make an Arrow table visible to SQL under `name` (for joins against the store)."""
        ...

    def unregister(self, name: str) -> None: ...

    def transaction(self) -> AbstractContextManager[None]:
        """All-or-nothing block: a failed batch leaves nothing behind."""
        ...

    def close(self) -> None: ...


@contextmanager
def registered(store: Store, name: str, data: pa.Table) -> Iterator[None]:
    """`data` visible to SQL as `name` for the block's length (unregistered on errors too)."""
    store.register(name, data)
    try:
        yield
    finally:
        store.unregister(name)
