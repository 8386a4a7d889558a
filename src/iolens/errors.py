"""The iolens exception tree.

IolensError                 anything iolens reports to a person (one clear line, no traceback)
 ├── InputError             bad input data: names the source (file, request) and line
 ├── StoreError             the database is missing, corrupt, or from a newer iolens
 └── NotFound               a job, component or file that is not in the store
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

__all__ = ["InputError", "IolensError", "NotFound", "StoreError", "reading"]


class IolensError(Exception):
    """Base of every error meant for a person rather than a traceback."""


class InputError(IolensError):
    """Malformed input: a log, a stats file, a trace or a request."""

    def __init__(self, source: str, message: str, line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


class StoreError(IolensError):
    """The store cannot be opened or used."""


class NotFound(IolensError):
    """A requested object does not exist in the store."""


@contextlib.contextmanager
def reading(path: Path, directory: str = "is a directory") -> Iterator[None]:
    """OS errors while reading an input file, as InputError naming the file."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), directory) from None
    except OSError as exc:
        raise InputError(str(path), exc.strerror or str(exc)) from None
