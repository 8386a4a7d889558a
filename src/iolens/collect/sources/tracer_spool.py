"""Ship the LD_PRELOAD tracer's per-process files from this node's spool.

The tracer writes `<host>-<pid>-<start>-<seg>.iolens` atomically (`*.partial`, then
rename), so every complete file here is final. Each becomes one batch carrying the file as
written (`Batch.trace`): the server decodes it into the batch, with the same key,
`iolens import trace` would give it, so the node agent needs no decoder (numpy, pyarrow).
The file is deleted only after the agent has put the batch in its disk spool. A file whose
framing is wrong (bad magic, a version this iolens does not read, a truncated section, no
END section) is moved to `bad/` (never deleted: it is somebody's data) and reported once;
`*.partial` files belong to running processes, or to killed ones whose trace is unreadable
(see docs/tracer.md) and are left alone.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import ClassVar

from iolens.errors import InputError
from iolens.model.batch import Batch

log = logging.getLogger(__name__)

DEFAULT_DIR = Path("/var/spool/iolens/traces")

# Mirrored from iolens.tracefile (format.py, trace.py), which needs numpy: the framing is
# all the agent checks. tests/collect/test_tracer_spool.py keeps them equal.
SUFFIX = ".iolens"
MAGIC = b"IOLTRACE"
READABLE_VERSIONS = (1, 2, 3)
ENDIAN_MARK = 0x01020304
SEC_END = 0x454E44
_PREAMBLE = struct.Struct("<8sII")  # magic, version, endian mark
_SECTION = struct.Struct("<IIQ")  # type, aux, body length


def check_framing(data: bytes, name: str) -> None:
    """InputError unless `data` is a complete tracer file by its framing (the server
    decodes the sections themselves)."""
    if len(data) < _PREAMBLE.size:
        raise InputError(name, "truncated: shorter than the file preamble")
    magic, version, endian = _PREAMBLE.unpack_from(data)
    if magic != MAGIC:
        raise InputError(name, "not an iolens trace (bad magic)")
    if version not in READABLE_VERSIONS:
        raise InputError(name, f"format version {version} (this iolens reads {READABLE_VERSIONS})")
    if endian != ENDIAN_MARK:
        raise InputError(name, "written on a big-endian host (not supported)")
    pos = _PREAMBLE.size
    while pos < len(data):
        if pos + _SECTION.size > len(data):
            raise InputError(name, f"truncated: partial section header at byte {pos}")
        kind, _aux, length = _SECTION.unpack_from(data, pos)
        pos += _SECTION.size + length
        if pos > len(data):
            raise InputError(name, "truncated: a section runs past the end of the file")
        if kind == SEC_END:
            if pos != len(data):
                raise InputError(name, f"data after the END section at byte {pos}")
            return
    raise InputError(name, "truncated: no END section (the process may have been killed)")


class TracerSpoolSource:
    """Per-process trace files -> batches carrying them, decoded by the server."""

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
                data = path.read_bytes()
                check_framing(data, path.name)
            except InputError as exc:
                self._quarantine(path, exc)
                continue
            except FileNotFoundError:  # another agent (or an operator) took it
                continue
            batch = Batch(source=f"tracer:{path}", key=f"tracefile:{self.host}:{path.name}")
            batch.trace = (path.name, data)
            yield batch, partial(path.unlink, missing_ok=True)

    def _quarantine(self, path: Path, exc: InputError) -> None:
        bad = path.parent / "bad"
        bad.mkdir(exist_ok=True)
        path.replace(bad / path.name)
        self.quarantined += 1
        log.error("tracer file %s does not decode, moved to %s: %s", path.name, bad, exc)
