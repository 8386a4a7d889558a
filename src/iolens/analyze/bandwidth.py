"""A job's bandwidth: one definition for every report, plot and rule.

**bytes / I/O time of the slowest rank**, per direction and for both directions together,
which is `darshan-parser --perf`'s `agg_perf_by_slowest` (darshan-util 3.4+,
`darshan-logutils-accumulator.c`, `darshan_accumulator_emit`, and PyDarshan 3.5's
`accumulate_records`): per module, the bytes read and written over
`agg_time_by_slowest` = the largest per-rank sum of read + write + metadata time over the
rank's own (non-shared) records + the sum of every shared record's `F_SLOWEST_RANK_TIME`
(`*_record_metrics` in `darshan-{posix,mpiio,stdio}-logutils.c` hand the accumulator a
shared record's slowest-rank time and a per-rank record's `F_META + F_READ + F_WRITE`).
It is what an MPI program that times its own calls and takes the slowest rank reports
(MPI-IO Test: total bytes / max over ranks of its write time), and what Darshan users
already see in `darshan-job-summary`.

How iolens applies it:

- **Layer.** Each file is timed at its outermost data layer, the one the application
  called: MPI-IO for files whose bytes went through MPI-IO, else POSIX, STDIO (and DFS).
  A pure MPI-IO job therefore gets darshan-parser's MPI-IO figure, a POSIX job its POSIX
  one. The standard streams are left out (they reach a terminal, not the file system).
- **Per direction.** Read (write) bandwidth is read (written) bytes over the slowest
  rank's read (write) time, with the same construction. A per-rank record has its own
  read and write times; a shared record keeps only the slowest rank's total, so that is
  apportioned by the file's read/write/metadata time shares, which is exact for a file
  that was only read or only written.
- **Processes that do not run together.** Darshan's formula assumes the ranks of one log
  run concurrently. A job made of several logs, or a traced job made of several
  processes, is split into groups of processes whose I/O overlaps in time; each group
  contributes its slowest process, and the groups' times add up (a script running `dd`
  then `tar` takes the time of both).
- **Traced jobs** (the LD_PRELOAD tracer) have every call's own duration (`dur_ns`,
  nanoseconds, never whole-second bins), per process and file, so the slowest process is
  known exactly: no shared-record estimate. A process's time in a direction is the sum of
  its calls' durations, but never more than the span from its first to its last such call
  (threads of one process can be inside calls at the same time).
- **I/O time** (`io_time_s`) is that slowest-rank time, clipped to the log's (and the
  job's) run time: Darshan's sum over shared files adds slowest ranks that may differ, and
  threads blocked in calls at the same time add up in the counters (the darshan package's
  `dxt.darshan`: 11,218 s of metadata time in a 1,469-s single-process run).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from iolens.model.schema import LAYER_LEVELS, UPPER_LAYERS
from iolens.model.system_files import STREAM_IDS, STREAMS, system_file_sql

if TYPE_CHECKING:
    import pyarrow as pa

    from iolens.model.darshan import DarshanJob
    from iolens.store.base import Store

#: Data layers, innermost first: a file is timed at the outermost one it has bytes in.
OUTER_LAYER = "MPI-IO"
#: Darshan modules of the data layers and their counter prefixes.
DARSHAN_PREFIX = {"MPI-IO": "MPIIO", "POSIX": "POSIX", "STDIO": "STDIO", "DFS": "DFS"}

DEFINITION = "bytes / I/O time of the slowest rank (darshan-parser --perf, agg_perf_by_slowest)"
TRACED = "bytes / I/O time of the slowest process, from each traced call's own duration"

#: Columns of the per-record frame `of_records` reads: `group` (processes that run
#: together: a log's ranks), `process` (a rank within it; < 0: a shared record), `layer`,
#: `id` (file), bytes and seconds per direction, `slowest_time` (shared records), and
#: `t0`/`t1`, the span of the group's processes' I/O, for grouping overlapping logs.
RECORD_COLUMNS = (
    "group",
    "process",
    "layer",
    "id",
    "bytes_read",
    "bytes_written",
    "read_time",
    "write_time",
    "meta_time",
    "slowest_time",
    "t0",
    "t1",
)


@dataclass(frozen=True)
class Bandwidth:
    """A job's bytes and slowest-rank times; the rates follow from them."""

    read_bytes: int
    write_bytes: int
    read_time_s: float  # the slowest rank's time in reads
    write_time_s: float  # ... in writes
    io_time_s: float  # ... in reads, writes and metadata (Darshan's agg_time_by_slowest)
    layer: str  # the layers the files were timed at, e.g. "MPI-IO" or "POSIX+STDIO"
    definition: str

    @property
    def read_bw(self) -> float:
        return self.read_bytes / self.read_time_s if self.read_time_s > 0 else 0.0

    @property
    def write_bw(self) -> float:
        return self.write_bytes / self.write_time_s if self.write_time_s > 0 else 0.0

    @property
    def bw(self) -> float:
        """Both directions over the slowest rank's whole I/O time: `agg_perf_by_slowest`."""
        moved = self.read_bytes + self.write_bytes
        return moved / self.io_time_s if self.io_time_s > 0 else 0.0

    def clipped(self, run_time_s: float | None) -> Bandwidth:
        """The same with no time above the job's run time (unknown run time: unchanged)."""
        if not run_time_s or run_time_s <= 0:
            return self
        return Bandwidth(
            self.read_bytes,
            self.write_bytes,
            min(self.read_time_s, run_time_s),
            min(self.write_time_s, run_time_s),
            min(self.io_time_s, run_time_s),
            self.layer,
            self.definition,
        )

    def described(self) -> str:
        """The definition as the report states it, with the layer it was measured at."""
        return (
            f"{self.definition}; timed at the {self.layer} layer"
            if self.layer
            else (self.definition)
        )


NONE = Bandwidth(0, 0, 0.0, 0.0, 0.0, "", DEFINITION)


def outermost(recs: pd.DataFrame) -> pd.DataFrame:
    """Each file's records at its outermost data layer: MPI-IO for files whose bytes went
    through MPI-IO (its POSIX records describe the same bytes), else every other layer."""
    if not len(recs):
        return recs
    moved = (recs["bytes_read"] + recs["bytes_written"]) > 0
    mpi = recs["layer"] == OUTER_LAYER
    key = list(zip(recs["group"], recs["id"], strict=True))
    outer = {k for k, m in zip(key, mpi & moved, strict=True) if m}
    has_outer = np.fromiter((k in outer for k in key), bool, len(key))
    return recs[np.where(has_outer, mpi, ~mpi)]


def _groups(t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Connected components of overlapping [t0, t1] spans (index per span)."""
    n = len(t0)
    out = np.zeros(n, np.int64)
    if n == 0:
        return out
    order = np.argsort(t0, kind="stable")
    end = -np.inf
    g = -1
    for i in order:
        if t0[i] > end or g < 0:  # (a span without a start joins the last group)
            g += 1
        end = max(end, t1[i])
        out[i] = g
    return out


def _reduce(op: np.ufunc, index: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`op` (np.fmin, np.fmax: NaN-skipping) of `values` per `index` (0..max), NaN where
    a group has no number, as pandas' groupby min/max gives."""
    n = int(index.max()) + 1 if len(index) else 0
    out = np.full(n, np.nan)
    op.at(out, index, values)
    return out


def _known(x: np.ndarray) -> np.ndarray:
    """NaN as 0, as a pandas sum skips it."""
    return np.where(np.isnan(x), 0.0, x)


def of_records(recs: pd.DataFrame, definition: str = DEFINITION) -> Bandwidth:
    """The job's bandwidth from per-record bytes and times (columns `RECORD_COLUMNS`).

    Records of one `group` (a Darshan log) run together; groups whose [t0, t1] overlap
    are merged, then each merged group adds its slowest rank's time (see the module
    docstring for the per-direction apportioning of shared records).
    """
    recs = outermost(recs)
    if not len(recs):
        return Bandwidth(0, 0, 0.0, 0.0, 0.0, "", definition)
    # numpy rather than groupby: a log has few records, and pandas' per-call cost was most
    # of this function's time in `iolens darshan LOG`
    log = np.unique(recs["group"].to_numpy(), return_inverse=True)[1]
    t0, t1 = recs["t0"].to_numpy(float), recs["t1"].to_numpy(float)
    g = _groups(_reduce(np.fmin, log, t0), _reduce(np.fmax, log, t1))[log]
    # a merged group's wall time: no rank of it can have spent longer inside I/O calls
    wall = _reduce(np.fmax, g, t1) - _reduce(np.fmin, g, t0)
    wall = np.where(wall > 0, wall, np.inf)
    rt, wt, mt = (recs[c].to_numpy(float) for c in ("read_time", "write_time", "meta_time"))
    shared = recs["process"].to_numpy() < 0
    total = rt + wt + mt
    slow = recs["slowest_time"].to_numpy(float)
    frac = np.divide(slow, total, out=np.zeros(len(total)), where=total > 0)
    # each process of each log: its records' times add up; the slowest counts per group
    keys = np.stack([g[~shared], log[~shared], recs["process"].to_numpy(np.int64)[~shared]])
    proc = np.unique(keys, axis=1, return_inverse=True)[1].ravel()
    proc_group = _reduce(np.fmax, proc, g[~shared].astype(float)).astype(np.int64)
    times = {"read": rt, "write": wt, "io": total}
    out: dict[str, float] = {}
    for name, t in times.items():
        # shared records: the slowest rank's time, in this direction's share of the file's
        per_shared = slow if name == "io" else t * frac
        per_group = np.bincount(g, _known(np.where(shared, per_shared, 0.0)))
        if len(proc_group):
            by_proc = np.bincount(proc, _known(t[~shared]))
            slowest = np.full(len(per_group), -np.inf)
            np.maximum.at(slowest, proc_group, by_proc)
            per_group += np.where(np.isfinite(slowest), slowest, 0.0)
        out[name] = float(np.minimum(per_group, wall).sum())
    layer = "+".join(sorted(set(recs["layer"]), key=_layer_order))
    return Bandwidth(
        int(recs["bytes_read"].sum()),
        int(recs["bytes_written"].sum()),
        out["read"],
        out["write"],
        out["io"],
        layer,
        definition,
    )


def _layer_order(name: str) -> tuple[int, str]:
    return (0 if name == OUTER_LAYER else 1, name)


def of_calls(
    process: np.ndarray,
    file_id: np.ndarray,
    layer: np.ndarray,
    op: np.ndarray,
    nbytes: np.ndarray,
    dur_s: np.ndarray,
    t0: np.ndarray,
    t1: np.ndarray,
) -> Bandwidth:
    """The bandwidth of a traced job from its call records (the standard streams left
    out; the records hold no system files: `system_file_sql`).

    `op` is 0 read, 1 write, 2 metadata (anything else is ignored); `layer` the record's
    layer name ("mpiio" for MPI-IO calls, "hdf5", "pnetcdf"); `dur_s` the summed duration
    of the record's calls and [t0, t1] the span from its first call's start to its last
    call's end. Each process is a group of its own: processes whose I/O overlaps in time run
    together and the slowest counts; processes one after the other add up.
    """
    skip = np.fromiter(STREAM_IDS, np.int64)
    keep = (op <= 2) & ~np.isin(file_id, skip)
    if not keep.any():
        return Bandwidth(0, 0, 0.0, 0.0, 0.0, "", TRACED)
    # numpy throughout: the report runs this for every job of a day (hundreds)
    raw = layer[keep]
    lay = np.where(raw == "mpiio", OUTER_LAYER, raw).astype(object)
    fid, o = file_id[keep], op[keep]
    nb = nbytes[keep].astype(float)
    # each file at its outermost layer that moved data (HDF5 over MPI-IO over POSIX)
    level = np.select([raw == n for n in UPPER_LAYERS], [LAYER_LEVELS[n] for n in UPPER_LAYERS], 0)
    files, fi = np.unique(fid, return_inverse=True)
    top = np.zeros(len(files), dtype=level.dtype)
    moved = (o <= 1) & (nb > 0)
    np.maximum.at(top, fi[moved], level[moved])
    sel = level == top[fi]
    lay, o, nb = lay[sel], o[sel], nb[sel]
    dur = np.clip(dur_s[keep][sel].astype(float), 0.0, None)
    a = t0[keep][sel].astype(float)
    b = np.maximum(t1[keep][sel].astype(float), a)
    procs, pi = np.unique(process[keep][sel], return_inverse=True)
    n = len(procs)
    if n == 0:
        return Bandwidth(0, 0, 0.0, 0.0, 0.0, "", TRACED)
    first, last = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(first, pi, a)
    np.maximum.at(last, pi, b)
    grp = _groups(first, last)
    times: dict[str, float] = {}
    for name, mask in (("read", o == 0), ("write", o == 1), ("io", o <= 2)):
        if not mask.any():
            times[name] = 0.0
            continue
        # whole nanoseconds: their float sums are exact, so the figure does not depend on
        # the order the store hands the records out (DuckDB file vs dataset)
        d = np.bincount(pi[mask], weights=np.round(dur[mask] * 1e9), minlength=n) / 1e9
        lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
        np.minimum.at(lo, pi[mask], a[mask])
        np.maximum.at(hi, pi[mask], b[mask])
        busy = np.where(hi >= lo, np.minimum(d, hi - lo), 0.0)  # threads: never past the span
        slowest = np.zeros(int(grp.max()) + 1)
        np.maximum.at(slowest, grp, busy)
        times[name] = float(slowest.sum())
    layers = "+".join(
        sorted({x if x == OUTER_LAYER else str(x).upper() for x in set(lay)}, key=_layer_order)
    )
    return Bandwidth(
        int(nb[o == 0].sum()),
        int(nb[o == 1].sum()),
        times["read"],
        times["write"],
        times["io"],
        layers,
        TRACED,
    )


def darshan_records(log: DarshanJob, group: int = 0) -> pd.DataFrame:
    """One log's data records as `RECORD_COLUMNS` (counters Darshan left at -1 count 0)."""
    frames = []
    start = log.start.replace(tzinfo=UTC).timestamp() if log.start else 0.0
    end = start + max(log.run_time, 0.0)
    streams = {k for k, v in log.names.items() if v in STREAMS}
    for module, p in DARSHAN_PREFIX.items():
        if not log.has(module):
            continue
        c, f = log.counters(module), log.fcounters(module)

        def num(frame: pd.DataFrame, name: str) -> np.ndarray:
            if name not in frame.columns:
                return np.zeros(len(frame))
            return np.clip(frame[name].to_numpy(dtype=float), 0.0, None)

        ids = c["id"].to_numpy(dtype=np.uint64)
        frames.append(
            pd.DataFrame(
                {
                    "group": group,
                    "process": c["rank"].to_numpy(dtype=np.int64),
                    "layer": module,
                    "id": ids,
                    "bytes_read": num(c, f"{p}_BYTES_READ"),
                    "bytes_written": num(c, f"{p}_BYTES_WRITTEN"),
                    "read_time": num(f, f"{p}_F_READ_TIME"),
                    "write_time": num(f, f"{p}_F_WRITE_TIME"),
                    "meta_time": num(f, f"{p}_F_META_TIME"),
                    "slowest_time": num(f, f"{p}_F_SLOWEST_RANK_TIME"),
                    "t0": start,
                    "t1": end,
                }
            )[~np.isin(ids, np.fromiter(streams, np.uint64, len(streams)))]
        )
    frames = [x for x in frames if len(x)]
    if not frames:
        return pd.DataFrame(columns=list(RECORD_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def of_darshan(logs: Iterable[DarshanJob]) -> Bandwidth:
    """The bandwidth of a job from its Darshan logs (one log: darshan-parser --perf's
    `agg_perf_by_slowest` of the layer its files were accessed through)."""
    frames = [darshan_records(log, i) for i, log in enumerate(logs)]
    frames = [x for x in frames if len(x)]
    if not frames:
        return NONE
    return of_records(pd.concat(frames, ignore_index=True))


def of_log(log: DarshanJob) -> Bandwidth:
    """One log's bandwidth, with no time above its run time."""
    return of_darshan([log]).clipped(log.run_time)


# The same records straight from the store, for many jobs at once (the per-job report):
# each value is looked up by its counter name in the module's name list.
_STORE_SQL = """
WITH p(module, pfx) AS (VALUES {prefixes})
SELECT l.job_id, r.log_key AS "group", r.rank AS process, r.module AS layer,
       r.record_id AS id, {columns},
       epoch_us(l."start") / 1e6 AS t0,
       epoch_us(l."start") / 1e6 + greatest(coalesce(l.run_time_s, 0), 0) AS t1
FROM darshan_records r
JOIN p USING (module)
JOIN darshan_modules m USING (log_key, module)
JOIN darshan_logs l USING (log_key)
JOIN {ids} j ON j.job_id = l.job_id
WHERE r.path IS NULL OR r.path NOT IN ({streams})
"""
_STORE_VALUES = {
    "bytes_read": ("counters", "_BYTES_READ"),
    "bytes_written": ("counters", "_BYTES_WRITTEN"),
    "read_time": ("fcounters", "_F_READ_TIME"),
    "write_time": ("fcounters", "_F_WRITE_TIME"),
    "meta_time": ("fcounters", "_F_META_TIME"),
    "slowest_time": ("fcounters", "_F_SLOWEST_RANK_TIME"),
}


def from_store(store: Store, ids_table: str) -> dict[str, Bandwidth]:
    """Bandwidth of every Darshan job listed in the registered table `ids_table`
    (column `job_id`), from the stored counters; jobs without Darshan logs are absent."""
    columns = ", ".join(
        f"greatest(coalesce(r.{kind}[list_position(m.{kind[:-1]}_names, p.pfx || '{suffix}')]"
        f", 0), 0)::DOUBLE AS {name}"
        for name, (kind, suffix) in _STORE_VALUES.items()
    )
    sql = _STORE_SQL.format(
        prefixes=", ".join(f"('{m}', '{p}')" for m, p in DARSHAN_PREFIX.items()),
        columns=columns,
        ids=ids_table,
        streams=", ".join(f"'{s}'" for s in sorted(STREAMS)),
    )
    rows = store.query(sql).to_pandas()
    if not len(rows):
        return {}
    return {str(j): of_records(g.drop(columns="job_id")) for j, g in rows.groupby("job_id")}


def system_files(store: Store, ids_table: str) -> pa.Table:
    """The system files each traced job in `ids_table` touched (`system_file_sql`):
    columns `job_id`, `file_id`."""
    return store.query(
        f"SELECT DISTINCT job_id, file_id FROM client_io JOIN {ids_table} USING (job_id) "
        f"WHERE {system_file_sql()}"
    )
