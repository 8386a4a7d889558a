"""Darshan logs before any library reads them: which files are logs, and the words for how
reading one fails.

Standard library only, so `iolens darshan LOG` can find its logs and fork the child that
reads the first one before this process imports numpy, pandas or libdarshan-util: the
child's reading and the parent's imports then run at the same time.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

#: The file name suffix Darshan gives its logs.
SUFFIX = ".darshan"

#: Seconds one log may take in a reading process before it is killed (a library caught in
#: a loop).
DECODE_TIMEOUT_S = 600.0

#: Why a log without module data is refused (by the importer and by `iolens darshan`).
EMPTY_LOG = (
    "empty Darshan log: no module data (Darshan recorded no I/O; instrumentation was "
    "disabled or failed)"
)


def log_files(paths: Iterable[Path]) -> list[Path]:
    """Darshan logs under the given files or directories (recursively), in name order.

    A named file is taken whatever its suffix; a directory contributes its `*.darshan`
    files. Missing paths are kept, so they fail as one entry of the batch.
    """
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(x for x in p.rglob(f"*{SUFFIX}") if x.is_file())
        else:
            found.append(p)
    return found


def last_words(said: bytes) -> str:
    """The library's (or the C runtime's) last stderr line, as a parenthesis."""
    text = said.decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    last = lines[-1].removeprefix("python: ").removeprefix("/project/darshan-util/")
    return f" (last message: {last[:300]})"
