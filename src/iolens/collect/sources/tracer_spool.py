"""Ship the LD_PRELOAD tracer's per-process files from this node's spool.

The tracer writes `<host>-<pid>-<start>-<seg>.iolens` atomically (`*.partial`, then
rename), so every complete file here is final. Each becomes one batch with the same key
`iolens import trace` would give it, and is deleted only after the agent has put the batch
in its disk spool. A file that does not decode is moved to `bad/` (never deleted: it is
somebody's data) and reported once; `*.partial` files belong to running processes, or to
killed ones whose trace is unreadable (see docs/tracer.md) and are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import ClassVar

from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.tracefile import SUFFIX, batch_of, decode

log = logging.getLogger(__name__)

DEFAULT_DIR = Path("/var/spool/iolens/traces")


class TracerSpoolSource:
    """Per-process trace files -> client I/O batches."""

    name: ClassVar[str] = "tracer_spool"

    def __init__(self, host: str, directory: Path = DEFAULT_DIR, max_files: int = 256) -> None:
        self.host = host
        self.directory = directory
        self.max_files = max_files  # per round: bounds the agent's memory on a backlog
        self.quarantined = 0

    def batches(self, root: Path) -> Iterator[tuple[Batch, Callable[[], None]]]:
        spool = root / self.directory.relative_to(self.directory.anchor)
        if not spool.is_dir():
            return
        files = sorted(p for p in spool.glob(f"*{SUFFIX}") if p.is_file())
        for path in files[: self.max_files]:
            try:
                batch = batch_of(decode(path))
            except InputError as exc:
                self._quarantine(path, exc)
                continue
            except FileNotFoundError:  # another agent (or an operator) took it
                continue
            yield batch, partial(path.unlink, missing_ok=True)

    def _quarantine(self, path: Path, exc: InputError) -> None:
        bad = path.parent / "bad"
        bad.mkdir(exist_ok=True)
        path.replace(bad / path.name)
        self.quarantined += 1
        log.error("tracer file %s does not decode, moved to %s: %s", path.name, bad, exc)
