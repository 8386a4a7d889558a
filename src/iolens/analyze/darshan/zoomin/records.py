"""One normalised frame of a job's data records, across the modules that reach the files.

POSIX and STDIO name the same quantities differently and MPI-IO sits on top of POSIX (its
bytes would be counted twice), so every zoom-in computation reads this frame instead of
the raw modules: one row per Darshan record, the same columns whatever the module.
Counters Darshan leaves at -1 ("not recorded") become 0, timestamps that never happened
stay 0 and are treated as absent, and negative durations (clock jitter of a few
microseconds, seen in the darshan package's dxt.darshan) count as 0.

The standard streams are left out: what a job prints goes to a terminal or through the
scheduler's pipe, not to the file system, and a few `printf` calls would otherwise
dominate request counts and covering sets.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from iolens.model.darshan import DarshanJob

#: Modules whose bytes reach the file system directly; MPI-IO and HDF5 sit above POSIX.
DATA_MODULES = ("POSIX", "STDIO")
#: Used only when a log has neither POSIX nor STDIO records (for example MPI-IO over DAOS).
FALLBACK_MODULES = ("MPI-IO",)

#: Darshan's names for the standard streams.
STREAMS = frozenset({"<STDIN>", "<STDOUT>", "<STDERR>"})

_PREFIX = {"POSIX": "POSIX", "STDIO": "STDIO", "MPI-IO": "MPIIO"}

COLUMNS = (
    "module",
    "id",
    "rank",
    "bytes_read",
    "bytes_written",
    "reads",
    "writes",
    "read_time",
    "write_time",
    "meta_time",
    "fastest_rank",
    "fastest_bytes",
    "fastest_time",
    "slowest_rank",
    "slowest_bytes",
    "slowest_time",
    "max_byte",
    "open_start",
    "close_end",
    "read_start",
    "read_end",
    "write_start",
    "write_end",
)


def _col(frame: pd.DataFrame, name: str, n: int, dtype: type) -> np.ndarray:
    if name in frame.columns:
        return frame[name].to_numpy(dtype=dtype)
    return np.zeros(n, dtype=dtype)


def _module_frame(job: DarshanJob, module: str) -> pd.DataFrame:
    p = _PREFIX[module]
    c = job.counters(module)
    f = job.fcounters(module)
    n = len(c)  # the reader builds both frames in the same record order
    cnt = {
        "bytes_read": f"{p}_BYTES_READ",
        "bytes_written": f"{p}_BYTES_WRITTEN",
        "fastest_rank": f"{p}_FASTEST_RANK",
        "fastest_bytes": f"{p}_FASTEST_RANK_BYTES",
        "slowest_rank": f"{p}_SLOWEST_RANK",
        "slowest_bytes": f"{p}_SLOWEST_RANK_BYTES",
    }
    out: dict[str, object] = {
        "module": np.full(n, module, dtype=object),
        "id": c["id"].to_numpy(dtype=np.uint64) if n else np.zeros(0, np.uint64),
        "rank": c["rank"].to_numpy(dtype=np.int64) if n else np.zeros(0, np.int64),
    }
    for k, name in cnt.items():
        v = _col(c, name, n, np.int64)
        out[k] = v if k.endswith("rank") else np.clip(v, 0, None)
    if module == "MPI-IO":
        reads = sum(
            _col(c, f"MPIIO_{k}_READS", n, np.int64) for k in ("INDEP", "COLL", "SPLIT", "NB")
        )
        writes = sum(
            _col(c, f"MPIIO_{k}_WRITES", n, np.int64) for k in ("INDEP", "COLL", "SPLIT", "NB")
        )
    else:
        reads, writes = _col(c, f"{p}_READS", n, np.int64), _col(c, f"{p}_WRITES", n, np.int64)
    out["reads"] = np.clip(reads, 0, None)
    out["writes"] = np.clip(writes, 0, None)
    mb = np.maximum(
        _col(c, f"{p}_MAX_BYTE_READ", n, np.int64), _col(c, f"{p}_MAX_BYTE_WRITTEN", n, np.int64)
    )
    out["max_byte"] = mb
    fl = {
        "read_time": "F_READ_TIME",
        "write_time": "F_WRITE_TIME",
        "meta_time": "F_META_TIME",
        "fastest_time": "F_FASTEST_RANK_TIME",
        "slowest_time": "F_SLOWEST_RANK_TIME",
        "open_start": "F_OPEN_START_TIMESTAMP",
        "close_end": "F_CLOSE_END_TIMESTAMP",
        "read_start": "F_READ_START_TIMESTAMP",
        "read_end": "F_READ_END_TIMESTAMP",
        "write_start": "F_WRITE_START_TIMESTAMP",
        "write_end": "F_WRITE_END_TIMESTAMP",
    }
    for k, name in fl.items():
        out[k] = np.clip(_col(f, f"{p}_{name}", n, np.float64), 0.0, None)
    return pd.DataFrame(out, columns=list(COLUMNS))


def dxt_bytes(dxt: pd.DataFrame) -> np.ndarray:
    """Bytes of each DXT row: merged runs carry `count` operations of `length` bytes."""
    length = dxt["length"].to_numpy(dtype=np.int64)
    if "count" in dxt.columns:
        return length * dxt["count"].to_numpy(dtype=np.int64)
    return length


def data_modules(job: DarshanJob) -> tuple[str, ...]:
    """The modules the zoom-in figures are computed over for this job."""
    mods = tuple(m for m in DATA_MODULES if job.has(m))
    return mods or tuple(m for m in FALLBACK_MODULES if job.has(m))


def data_records(job: DarshanJob, modules: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Every record of `modules` (default: `data_modules(job)`) in the normalised layout
    (built once per log and modules; each caller gets its own copy to change)."""
    mods = data_modules(job) if modules is None else tuple(m for m in modules if job.has(m))
    return job.derived(("data_records", mods), lambda: _records(job, mods)).copy()


def _records(job: DarshanJob, mods: tuple[str, ...]) -> pd.DataFrame:
    frames = [_module_frame(job, m) for m in mods]
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_like()
    out = pd.concat(frames, ignore_index=True)
    names = job.names
    out = out[[names.get(int(i), "") not in STREAMS for i in out["id"]]].reset_index(drop=True)
    out["bytes"] = out["bytes_read"] + out["bytes_written"]
    out["requests"] = out["reads"] + out["writes"]
    out["io_time"] = out["read_time"] + out["write_time"] + out["meta_time"]
    return out


def _dtype(col: str) -> str:
    if col == "module":
        return "object"
    if col == "id":
        return "uint64"
    if col in ("rank", "fastest_rank", "slowest_rank", "max_byte") or col.startswith(
        ("bytes", "fastest_bytes", "slowest_bytes", "reads", "writes")
    ):
        return "int64"
    return "float64"


def empty_like() -> pd.DataFrame:
    out = pd.DataFrame({k: pd.Series(dtype=_dtype(k)) for k in COLUMNS})
    out["bytes"] = pd.Series(dtype="int64")
    out["requests"] = pd.Series(dtype="int64")
    out["io_time"] = pd.Series(dtype="float64")
    return out
