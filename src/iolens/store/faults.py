"""Telling the store failing from a batch it refuses.

Inside a group commit the two need opposite answers: a batch the store refuses (a NULL in a
NOT NULL column, a value that does not convert) is that batch's fault, a 400 for it alone
once the group is retried one by one; the store itself failing (a full disk, an I/O error,
a database DuckDB invalidated after a fatal error) is every batch's 503, and retrying them
one by one would only fail them all again.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from iolens.errors import StoreError


class DamagedStore(StoreError):
    """DuckDB cannot read the file: truncated, a zeroed or corrupt block."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        super().__init__(
            f"{path} is damaged ({reason}): restore it from a backup, or move it aside "
            "and start a new store (`iolens serve` creates one)"
        )


#: DuckDB errors that are the database's or the machine's, not the statement's.
_STORE_ERRORS: tuple[type[BaseException], ...] = (
    duckdb.IOException,
    duckdb.FatalException,
    duckdb.InternalException,
    duckdb.TransactionException,  # "Failed to commit: Could not write file ...": the WAL
    duckdb.ConnectionException,  # closed after a failure, not reopened yet
    duckdb.OutOfMemoryException,
    OSError,
    MemoryError,
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return seen


def is_store_failure(exc: BaseException) -> bool:
    """True when `exc` (or what caused it) is the store or the machine failing: one of
    those errors, or a StoreError of iolens's own (a damaged file, a server that does not
    ingest) rather than a statement DuckDB refused."""
    chain = _chain(exc)
    return is_io_failure(exc) or any(
        isinstance(e, DamagedStore)
        or (isinstance(e, StoreError) and not isinstance(e.__cause__, duckdb.Error))
        for e in chain
    )


def is_io_failure(exc: BaseException) -> bool:
    """True when the database or the machine failed (I/O, a fatal or internal error, a
    commit that could not be written): the store may work again later, by itself or once
    reopened; not a store that refuses by design."""
    return any(isinstance(e, (*_STORE_ERRORS, DamagedStore)) for e in _chain(exc))


def is_invalidated(exc: BaseException) -> bool:
    """True when DuckDB invalidated the database: only closing and reopening it helps."""
    return any(
        isinstance(e, duckdb.FatalException) or "database has been invalidated" in str(e)
        for e in _chain(exc)
    )


def describe(exc: BaseException) -> str:
    """One line: the error's first line (DuckDB's carry context lines), else its type."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
