"""What the Darshan reader hands out: counter blocks, heatmaps and DXT file records.

Plain shapes with the module lists and counter names they are built from (PyDarshan's),
so the importer and the merging code use them without opening a log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from iolens.model.darshan import ModuleData

if TYPE_CHECKING:
    from iolens.ingest.darshan_binding import Binding

#: Modules with fixed-size records read into counter frames (PyDarshan's struct names).
FIXED_MODULES = (
    "POSIX",
    "MPI-IO",
    "STDIO",
    "H5F",
    "H5D",
    "PNETCDF_FILE",
    "PNETCDF_VAR",
    "DFS",
    "DAOS",
    "BG/Q",
)
#: AutoPerf modules: a header record, then one fixed-size record per rank.
AUTOPERF_MODULES = ("APMPI", "APXC")
DXT_MODULES = ("DXT_POSIX", "DXT_MPIIO")

#: One DXT segment as libdarshan-util lays it out (`struct segment_info`).
SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])

#: Segments decoded and merged per numpy pass: bounds memory on records of millions.
MERGE_WINDOW = 1 << 16


def backend() -> Binding:
    """libdarshan-util's binding, loaded when a log is first read (`darshan_binding`)."""
    from iolens.ingest.darshan_binding import binding

    return binding()


@dataclass
class DxtRecord:
    """One DXT file record (one file on one rank): its segments come from `ops()`."""

    module: str
    id: int
    rank: int
    hostname: str
    writes: int
    reads: int
    _source: Iterator[tuple[str, Iterator[np.ndarray]]] = field(default_factory=lambda: iter(()))

    def ops(self) -> Iterator[tuple[str, Iterator[np.ndarray]]]:
        """("write", windows), then ("read", windows): SEGMENT arrays in time order, each
        of at most `MERGE_WINDOW`; consume them in this order."""
        return self._source


@dataclass
class Heatmap:
    """One HEATMAP record: bytes per time bin since the job start, for one module/rank."""

    module: str  # the instrumented module, from the record name "heatmap:POSIX"
    rank: int
    bin_width: float  # seconds
    write_bins: np.ndarray
    read_bins: np.ndarray


@dataclass
class Block:
    """A fixed-size module's records as numpy blocks: what the store keeps, and what the
    importer computes from without going through pandas."""

    module: str
    ids: np.ndarray  # uint64 record ids (name hashes)
    ranks: np.ndarray  # int64, -1 for records Darshan reduced over all ranks
    c: np.ndarray  # (records, counters) int64, in counter-name order
    f: np.ndarray  # (records, fcounters) float64
    cnames: list[str]
    fnames: list[str]
    version: int = 0
    partial: bool = False

    def __post_init__(self) -> None:
        self._at = {n: i for i, n in enumerate(self.cnames)}
        self._fat = {n: i for i, n in enumerate(self.fnames)}

    def __len__(self) -> int:
        return len(self.ids)

    def col(self, name: str) -> np.ndarray:
        """A counter's column (int or float); zeros when this format version lacks it."""
        if name in self._at:
            return self.c[:, self._at[name]]
        if name in self._fat:
            return self.f[:, self._fat[name]]
        return np.zeros(len(self.ids), np.float64 if "_F_" in name else np.int64)

    def data(self) -> ModuleData:
        """The `DarshanJob` form: PyDarshan's wide frames."""
        return ModuleData(
            _frame(self.ids, self.ranks, self.c, self.cnames),
            _frame(self.ids, self.ranks, self.f, self.fnames),
            self.version,
            self.partial,
        )


def _frame(ids: np.ndarray, ranks: np.ndarray, block: np.ndarray, names: list[str]) -> pd.DataFrame:
    out = pd.concat([pd.DataFrame({"id": ids, "rank": ranks}), pd.DataFrame(block)], axis=1)
    # plain object labels: pandas 3 makes string labels Arrow-backed, and every counter
    # lookup by name then costs a few microseconds more (the rules make thousands)
    out.columns = pd.Index(["id", "rank", *names], dtype=object)
    return out


def counter_names(module: str, fcounters: bool = False, special: str = "") -> list[str]:
    key = "BGQ" if module == "BG/Q" else module
    return backend().counter_names(key, fcounters, special)


def fcounter_names(module: str) -> list[str]:
    return counter_names(module, True)


def make_block(
    module: str,
    ids: np.ndarray,
    ranks: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    cnames: list[str],
    fnames: list[str],
    info: dict[str, Any],
) -> Block:
    n = len(ids)
    return Block(
        module,
        np.asarray(ids, np.uint64).copy(),
        np.asarray(ranks, np.int64).copy(),
        np.ascontiguousarray(np.asarray(c, np.int64).reshape(n, -1)),
        np.ascontiguousarray(np.asarray(f, np.float64).reshape(n, -1)),
        cnames,
        fnames,
        int(info["version"]),
        bool(info["partial"]),
    )
