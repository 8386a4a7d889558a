"""What every step of importing one Darshan log shares: its `ImportResult`, and its
`LogContext` (the job, its counter blocks, file ids, times, and which layer owns which
file's bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from iolens.ingest.darshan_records import Block
from iolens.model.darshan import DarshanJob
from iolens.model.ids import file_id

SOURCE = "darshan"

_EPOCH = datetime(1970, 1, 1)


@dataclass
class ImportResult:
    """What happened to one log file."""

    path: Path
    status: str  # imported | skipped | failed
    error: str | None = None
    log_key: str | None = None
    job_id: str | None = None
    records: int = 0  # darshan_records rows
    client_io: int = 0
    partial: list[str] = field(default_factory=list)  # modules Darshan marked incomplete
    findings: int | None = None  # None: no diagnosis ran
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def now() -> datetime:
    """Naive UTC, as the store keeps times."""
    return datetime.now(UTC).replace(tzinfo=None)


class LogContext:
    """One log being imported: the job, its blocks and ids, and the choices every table
    shares."""

    def __init__(self, job: DarshanJob, extra: dict[str, Any], pid: int | None) -> None:
        self.job = job
        self.blocks: dict[str, Block] = extra["blocks"]
        self.heatmaps = extra["heatmaps"]
        self.autoperf: dict[str, dict[str, Any]] = extra["autoperf"]
        self.hosts: dict[int, str] = dict(extra["hosts"])  # rank -> host (APMPI, DXT)
        self.pid = pid
        self.t0_us = (job.start - _EPOCH) // timedelta(microseconds=1)
        self._fids: dict[int, int] = {}
        posix = self.blocks.get("POSIX")
        self.posix_ids = set(posix.ids.tolist()) if posix is not None else set()
        self.mpiio_data = mpiio_owned(self.blocks)
        # (counter module, op) -> files whose data rows came from DXT
        self.dxt_cov: dict[tuple[str, str], set[int]] = {}

    def path(self, rid: int) -> str:
        return self.job.names.get(rid) or f"darshan-record:{rid:016x}"

    def fid(self, rid: int) -> int:
        f = self._fids.get(rid)
        if f is None:
            f = self._fids[rid] = file_id(self.path(rid))
        return f

    def ts(self, rel_s: np.ndarray) -> np.ndarray:
        rel = np.nan_to_num(np.clip(rel_s, 0, 1e9), posinf=1e9)  # garbage stays in range
        us = self.t0_us + np.rint(rel * 1e6).astype(np.int64)
        return us.astype("datetime64[us]")


def mpiio_owned(blocks: dict[str, Block]) -> dict[str, set[int]]:
    """Per direction, the files whose bytes are counted from MPI-IO rather than POSIX.

    MPI-IO runs on top of POSIX, so POSIX normally sees every byte (more, with data
    sieving or collective buffering). When it saw fewer (ROMIO drivers that bypass the
    interposed calls, a POSIX module that ran out of records), MPI-IO is the better count.
    """
    out: dict[str, set[int]] = {"read": set(), "write": set()}
    mpi, posix = blocks.get("MPI-IO"), blocks.get("POSIX")
    if mpi is None:
        return out
    for op, what in (("read", "READ"), ("write", "WRITTEN")):
        seen: dict[int, int] = {}
        if posix is not None:
            for i, v in zip(
                posix.ids.tolist(), posix.col(f"POSIX_BYTES_{what}").tolist(), strict=True
            ):
                seen[i] = seen.get(i, 0) + max(v, 0)
        moved: dict[int, int] = {}
        for i, v in zip(mpi.ids.tolist(), mpi.col(f"MPIIO_BYTES_{what}").tolist(), strict=True):
            moved[i] = moved.get(i, 0) + max(v, 0)
        out[op] = {i for i, v in moved.items() if v > seen.get(i, 0)}
    return out
