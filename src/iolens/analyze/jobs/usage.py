"""What each job asked of each shared component, second by second, from server samples.

Forwarders attribute requests to jobs through the client node and Lustre jobstats attribute
OST and MDT traffic: these per-job rows are where a job's load on a shared component is
measured rather than guessed. This module cuts each job's rows into *bursts* (one stretch
of I/O between two computations), each with its total work, what it moved through every
forwarder and OST, the processes it kept waiting behind each forwarder, and a smooth
progress curve.

Progress must be smoothed: a parallel job's ranks advance in lock-step, so its per-second
counts are a staircase (512 requests every few seconds for a throttled 512-rank job), and
shares computed second by second from raw counts would swing between 0 and 100 %.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from iolens.store.base import Store

#: Rank intervals closer than this (s) belong to one burst: the tracer merges the records
#: of a metadata phase per flush window, and consecutive windows touch.
WINDOW_SLACK_S = 2
#: A burst is a metadata burst when it issues at least this many metadata ops per request.
META_OPS_PER_UNIT = 2.0


@dataclass(frozen=True)
class Span:
    """A time range [lo, hi) in epoch seconds; None means unbounded."""

    lo: float | None = None
    hi: float | None = None

    def sql(self, column: str) -> tuple[str, list[float]]:
        where, params = [], []
        if self.lo is not None:
            where.append(f"epoch({column}) >= ?")
            params.append(self.lo)
        if self.hi is not None:
            where.append(f"epoch({column}) < ?")
            params.append(self.hi)
        return (" AND " + " AND ".join(where) if where else ""), params


EVERYTHING = Span()


@dataclass
class Capacity:
    """Benchmarked peak bandwidth and ops/s of a component (the `components` table)."""

    bw: float
    ops: float

    def cost(self, nbytes: float, ops: float) -> float:
        """Busy seconds the component needs to move `nbytes` in `ops` requests at peak."""
        return nbytes / self.bw + ops / self.ops


@dataclass
class Burst:
    """One I/O burst of a job: its work and how it progressed, per second."""

    job_id: str
    index: int
    start: int  # epoch second; extrapolated, since the first rows lag the real start
    end: int  # exclusive
    kind: str  # read | write | meta
    units: float  # requests (created files for metadata bursts)
    done: np.ndarray  # smoothed units completed in each second of [start, end)
    fwd_work: dict[str, tuple[float, float]]  # forwarder -> (bytes, requests) through it
    ost_work: dict[str, tuple[float, float]]  # OST -> (bytes, requests), as jobstats saw them
    md_ops: float
    procs: dict[str, int] = field(default_factory=dict)  # processes behind each forwarder
    n1: bool = False
    steps: tuple[np.ndarray, np.ndarray] | None = None  # (seconds, units) as observed
    floor: int = -(2**62)  # the previous burst's end

    def reshape(self, rate: float) -> None:
        """Re-smooth progress knowing the burst's peak rate (units/s); keeps its span."""
        if self.steps is not None:
            start, done = smooth_progress(*self.steps, self.floor, rate)
            if start == self.start and len(done) == len(self.done):
                self.done = done

    @property
    def remaining(self) -> np.ndarray:
        """Units still to do at the start of each second: what the burst asks for."""
        return self.units - (np.cumsum(self.done) - self.done)

    @property
    def nbytes(self) -> float:
        return float(sum(b for b, _ in self.fwd_work.values()))

    @property
    def request_size(self) -> float:
        return self.nbytes / self.units if self.units else 0.0

    @property
    def nprocs(self) -> int:
        return max(1, sum(self.procs.values()))

    @property
    def duration(self) -> int:
        return self.end - self.start


def capacities(store: Store) -> dict[str, Capacity]:
    rows = store.query(
        "SELECT component_id, peak_bw, peak_ops FROM components "
        "WHERE kind IN ('forwarder', 'ost') AND peak_bw > 0 AND peak_ops > 0"
    ).to_pylist()
    return {r["component_id"]: Capacity(r["peak_bw"], r["peak_ops"]) for r in rows}


def job_rows(store: Store, span: Span = EVERYTHING) -> pa.Table:
    """Per-job per-component per-second rows (second = start of the sample's interval)."""
    where, params = span.sql("ts")
    return store.query(
        "SELECT job_id, kind, component_id, "
        "CAST(floor(epoch(ts) - interval_s) AS BIGINT) AS sec, "
        "sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0))::DOUBLE AS nbytes, "
        "sum(coalesce(read_ops, 0) + coalesce(write_ops, 0))::DOUBLE AS ops, "
        "sum(coalesce(read_bytes, 0))::DOUBLE AS rbytes, "
        "sum(coalesce(md_ops, 0))::DOUBLE AS md "
        "FROM server_samples WHERE job_id IS NOT NULL "
        f"AND kind IN ('forwarder', 'ost', 'mds', 'mdt'){where} "
        "GROUP BY ALL ORDER BY job_id, sec",
        params,
    )


# Every process's open..close interval per data file, and first..last op per
# metadata-only target; islands of overlapping intervals are cut in numpy (DuckDB's
# running window aggregates over ties were not stable enough to number them).
_INTERVALS_SQL = """
WITH oc AS (
  SELECT job_id, node, pid, file_id, op, epoch(t_start) AS t0, epoch(t_end) AS t1,
         row_number() OVER (PARTITION BY job_id, node, pid, file_id, op
                            ORDER BY t_start, t_end) AS k
  FROM client_io WHERE op IN ('open', 'close') {where}),
data AS (
  SELECT DISTINCT c.job_id, c.file_id FROM client_io c
  SEMI JOIN (SELECT DISTINCT job_id, file_id FROM oc) f USING (job_id, file_id)
  WHERE c.op IN ('read', 'write') {where_c}),
paired AS (
  SELECT o.job_id, o.node, o.pid, o.t0 AS s, c.t1 AS e
  FROM oc o JOIN oc c USING (job_id, node, pid, file_id, k)
  SEMI JOIN data USING (job_id, file_id)
  WHERE o.op = 'open' AND c.op = 'close'),
spanned AS (
  SELECT job_id, node, pid, min(t0) AS s, max(t1) AS e FROM oc
  ANTI JOIN data USING (job_id, file_id)
  GROUP BY job_id, node, pid, file_id)
SELECT iv.job_id, iv.s, iv.e, hash(iv.node, iv.pid) AS proc, f.forwarder
FROM (SELECT * FROM paired UNION ALL SELECT * FROM spanned) iv
LEFT JOIN forwarding f ON iv.node = f.compute_node
ORDER BY iv.job_id, iv.s, iv.e
"""


@dataclass
class Window:
    """A burst's span [start, end) in epoch seconds and its processes behind each forwarder."""

    start: int
    end: int
    procs: dict[str, int]


def burst_windows(store: Store, span: Span = EVERYTHING) -> dict[str, list[Window]]:
    """Each job's bursts, from its processes' open/close pairs.

    A process opens its data file at its first request of a phase and closes it after its
    last, so the union of overlapping open..close intervals is one burst, however long the
    job was stalled inside it (a throttled phase can go minutes without a completed
    request). Metadata-only targets (the directories of a create/stat/unlink phase, whose
    records the tracer merges per flush window) count from their first to their last op.
    """
    where, params = span.sql("t_start")
    where_c, params_c = span.sql("c.t_start")
    t = store.query(_INTERVALS_SQL.format(where=where, where_c=where_c), params + params_c)
    out: dict[str, list[Window]] = {}
    if t.num_rows == 0:
        return out
    job = t.column("job_id").to_numpy(zero_copy_only=False)
    s, e = t.column("s").to_numpy(), t.column("e").to_numpy()
    proc = t.column("proc").to_numpy()
    fwd = t.column("forwarder").to_numpy(zero_copy_only=False)
    cut = np.nonzero(job[1:] != job[:-1])[0] + 1
    for a, b in zip(np.r_[0, cut], np.r_[cut, len(job)], strict=True):
        js, je = s[a:b], e[a:b]
        # A new island where an interval starts after everything before it has ended.
        reach = np.maximum.accumulate(je)
        new = np.r_[True, js[1:] > reach[:-1] + WINDOW_SLACK_S]
        isl = np.cumsum(new) - 1
        wins = []
        for k in range(int(isl[-1]) + 1):
            m = isl == k
            procs: dict[str, set[int]] = {}
            for f, p in zip(fwd[a:b][m], proc[a:b][m], strict=True):
                if f is not None:
                    procs.setdefault(str(f), set()).add(int(p))
            lo, hi = int(np.floor(js[m].min())), int(np.ceil(je[m].max()))
            wins.append(Window(lo, max(hi, lo + 1), {f: len(v) for f, v in procs.items()}))
        out[str(job[a])] = wins
    return out


#: Work left when a burst completes, for the shape of its tail (requests).
TAIL_END = 0.01


def smooth_progress(
    secs: np.ndarray, units: np.ndarray, floor: int, rate: float = np.inf
) -> tuple[int, np.ndarray]:
    """(start second, units done per second) from a staircase of per-second counts.

    The k-th step is recorded in the second in which progress crossed it, so the work left
    passes through (second + 1, remaining) at every step. Between steps it falls linearly
    while the burst runs at its processes' `rate`, and geometrically once what is left is
    below that rate: a burst then asks for all it has left and gets a share of it each
    second, so its tail decays like an exponential, not a line. The start is extrapolated
    back from the first two steps (the burst began before its first visible step), never
    before `floor`.
    """
    cum = np.cumsum(units)
    total = float(cum[-1])
    xs = secs.astype(float) + 1.0
    if len(xs) >= 2 and cum[1] > cum[0]:
        start = xs[0] - (xs[1] - xs[0]) * cum[0] / (cum[1] - cum[0])
    else:
        start = xs[0] - 1.0
    start_s = min(int(max(np.floor(start), floor)), int(xs[0]) - 1)
    start = max(start, float(start_s))
    px = np.concatenate([[start], xs])
    left = total - np.concatenate([[0.0], cum])
    grid = np.arange(start_s, int(xs[-1]) + 1, dtype=float)
    seg = np.clip(np.searchsorted(px, grid, side="right"), 1, len(px) - 1)
    a, b = px[seg - 1], px[seg]
    ra, rb = left[seg - 1], np.maximum(left[seg], TAIL_END)
    frac = np.clip((grid - a) / np.maximum(b - a, 1e-9), 0.0, 1.0)
    geometric = ra <= rate
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(
            geometric,
            ra * (rb / np.maximum(ra, TAIL_END)) ** frac,
            ra + (left[seg] - ra) * frac,
        )
    r = np.where(grid >= px[-1], 0.0, r)
    r[0] = total
    return start_s, -np.diff(r)


def bursts(
    rows: pa.Table, windows: dict[str, list[Window]], n1_jobs: set[str]
) -> dict[str, list[Burst]]:
    """Cut every job's rows into bursts with their work, costs and smoothed progress."""
    cols = {n: rows.column(n).to_numpy(zero_copy_only=False) for n in rows.column_names}
    job = cols["job_id"]
    out: dict[str, list[Burst]] = {}
    if len(job) == 0:
        return out
    cut = np.nonzero(job[1:] != job[:-1])[0] + 1
    for a, b in zip(np.r_[0, cut], np.r_[cut, len(job)], strict=True):
        j = str(job[a])
        c = {k: v[a:b] for k, v in cols.items()}
        fw = c["kind"] == "forwarder"
        if not fw.any() or j not in windows:
            continue
        # Work = data requests (created files for metadata bursts) through the forwarders.
        fsec, inv = np.unique(c["sec"][fw], return_inverse=True)
        f_units = np.bincount(inv, c["ops"][fw], len(fsec))
        f_md = np.bincount(inv, c["md"][fw], len(fsec))
        keep = (f_units > 0) | (f_md > 0)
        fsec, f_units, f_md = fsec[keep], f_units[keep], f_md[keep]
        found: list[Burst] = []
        prev_end = -(2**62)
        for w in windows[j]:
            i0, i1 = np.searchsorted(fsec, [w.start, w.end])
            units = f_units[i0:i1]
            if units.sum() <= 0:
                continue
            floor = prev_end
            start, done = smooth_progress(fsec[i0:i1], units, floor)
            prev_end = start + len(done)
            inside = (c["sec"] >= w.start) & (c["sec"] < w.end)
            md = float(f_md[i0:i1].sum())
            sel_f = fw & inside
            work: dict[str, dict[str, tuple[float, float]]] = {}
            for which, sel in (("forwarder", sel_f), ("ost", (c["kind"] == "ost") & inside)):
                names, inv = np.unique(c["component_id"][sel], return_inverse=True)
                nbytes = np.bincount(inv, c["nbytes"][sel], len(names))
                ops = np.bincount(inv, c["ops"][sel], len(names))
                work[which] = {
                    str(n): (float(b), float(o)) for n, b, o in zip(names, nbytes, ops, strict=True)
                }
            meta = md >= META_OPS_PER_UNIT * units.sum()
            rb, nb = float(c["rbytes"][sel_f].sum()), float(c["nbytes"][sel_f].sum())
            found.append(
                Burst(
                    job_id=j,
                    index=len(found),
                    start=start,
                    end=start + len(done),
                    kind="meta" if meta else ("read" if rb > nb / 2 else "write"),
                    units=float(units.sum()),
                    done=done,
                    fwd_work=work["forwarder"],
                    ost_work={} if meta else work["ost"],
                    md_ops=md,
                    procs=w.procs,
                    n1=(j in n1_jobs) and not meta,
                    steps=(fsec[i0:i1], units),
                    floor=floor,
                )
            )
        if found:
            out[j] = found
    return out
