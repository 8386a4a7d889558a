"""A Darshan log in memory: the one shape every Darshan analysis reads.

The importer builds it from a `.darshan` file (through PyDarshan's low-level reader) and
the store rebuilds it from the `darshan_*` tables, so the rules, the zoom-in factors and
the reports never care where a log came from. Counter frames have the same wide layout
as PyDarshan's `report.records[mod].to_df()` (columns `id`, `rank`, then one column per
counter), because that is what Darshan users, and Drishti, already reason in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import pandas as pd

#: Modules whose records are per-file counter records (the rest are DXT traces,
#: heatmaps, or per-process MPI/Cray summaries).
COUNTER_MODULES = ("POSIX", "MPI-IO", "STDIO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR")

T = TypeVar("T")


@dataclass
class ModuleData:
    """One module's records: `counters` (int64) and `fcounters` (float64) frames."""

    counters: pd.DataFrame  # columns: id (uint64 name hash), rank, <COUNTER>...
    fcounters: pd.DataFrame  # columns: id, rank, <F_COUNTER>...
    version: int = 0
    partial: bool = False  # Darshan ran out of records/memory: the data is incomplete


@dataclass
class DarshanJob:
    """One Darshan log: the job header, per-module counters, Lustre layouts, DXT."""

    job_id: str
    uid: int
    exe: str
    nprocs: int
    start: datetime  # UTC, naive
    end: datetime
    run_time: float  # seconds, as Darshan reports it
    log_version: str = ""
    lib_version: str = ""
    #: lib_ver, and h: the MPI-IO hints Darshan wrote its own log with (`darshan_own`)
    metadata: dict[str, str] = field(default_factory=dict)
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (mount point, fs type)
    modules: dict[str, ModuleData] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # record id -> file path
    #: LUSTRE module: one row per file: id, stripe_size, stripe_count, osts (list of int)
    lustre: pd.DataFrame | None = None
    #: DXT segments after first-pass merging: module (DXT_POSIX / DXT_MPIIO), rank,
    #: hostname, id, op (read/write), offset, length, stride, count, start, end
    #: (seconds since the job start).
    dxt: pd.DataFrame | None = None
    #: per-module partial flags and record counts, also for modules not loaded above
    module_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: str = ""  # the log file it came from
    #: what analyses derived from this log, by key (`derived`); not part of the log
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def derived(self, key: Any, build: Callable[[], T]) -> T:
        """`build()`, once per key for this log: a diagnosis asks for the same normalised
        records and rank loads from a dozen rules. A log is not changed once read
        (`dataclasses.replace` makes a new one, with nothing derived yet)."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]  # type: ignore[no-any-return]

    def forget(self) -> None:
        """Drop what was derived: for code that edits a log's counters in place (tests
        that build a case from a real log)."""
        self._derived.clear()

    def counters(self, module: str) -> pd.DataFrame:
        """The module's counter frame, or an empty frame when the log has no such module."""
        m = self.modules.get(module)
        return m.counters if m is not None else pd.DataFrame(columns=["id", "rank"])

    def fcounters(self, module: str) -> pd.DataFrame:
        m = self.modules.get(module)
        return m.fcounters if m is not None else pd.DataFrame(columns=["id", "rank"])

    def has(self, module: str) -> bool:
        m = self.modules.get(module)
        return m is not None and len(m.counters) > 0

    @property
    def partial_modules(self) -> list[str]:
        return sorted(k for k, v in self.module_info.items() if v.get("partial"))
