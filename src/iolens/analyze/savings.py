"""What a fix would save: seconds and core-hours, with a range, from a stated model.

A finding says what to change; this says what the change is worth, so findings can be
ordered by it and `iolens seff` can name the one change most likely to help. Every
estimate is built from three kinds of evidence, and says which it used:

* **the job's own calls**: its data time (the slowest rank's read + write time), its
  metadata time, its request count and sizes, and a per-call cost fitted to its own
  calls (duration = latency + size / rate, least squares over its client records);
* **the system's capacity**: the IO500 box of the system (`io500_runs`), scaled to the
  job's node count (clients are the limit below the node count IO500 ran on), and the
  benchmarked peaks of the forwarders and OSTs the job used (`components.peak_bw`);
* **the job's earlier runs**: how long phases of the same volume took before (IOL006),
  and the bandwidth the application got with another I/O mode at the same scale (IOL001).

The model is deliberately simple: a fix changes one cost (per-call overhead, a
bandwidth, a number of bytes or operations) and the saving is the time that cost takes
now minus the time it would take after. Where only a ceiling is known, the estimate is
the log-midpoint between the job's own rate and that ceiling, and the range runs from
the job's current rate (nothing gained) ... to the ceiling (everything gained): the
range is the honest part. A saving never exceeds the time the fixed cost takes now.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from iolens.model.schema import layer_level_sql
from iolens.model.system_files import system_file_sql

if TYPE_CHECKING:  # annotations only: `iolens darshan` prices findings without either
    from iolens.analyze.advise import Trial
    from iolens.analyze.jobreport import JobReport
    from iolens.store.base import Store

#: Request size a small-I/O fix aims at (the recommendation says ">= 1 MiB").
TARGET_REQUEST = 2**20
#: Stripe count a single-OST fix aims at, when the site has that many OSTs.
TARGET_STRIPES = 8


@dataclass(frozen=True)
class Capacity:
    """The most the system could give this job, and why (bytes/s, ops/s)."""

    easy_bw: float | None = None  # IO500 easy bandwidth scaled to the job's nodes
    hard_bw: float | None = None  # IO500 hard bandwidth scaled the same way
    easy_md: float | None = None  # IO500 easy metadata rate scaled the same way
    hard_md: float | None = None
    forwarders_bw: float | None = None  # sum of the job's forwarders' peaks
    osts_bw: float | None = None  # sum of the job's OSTs' peaks
    ost_peak: float | None = None  # the median peak of one OST of the site
    io500: str | None = None  # "system (N nodes)" of the box used

    def describe(self, with_osts: bool = True) -> str:
        """Where the ceiling comes from, for the model's sentence."""
        parts = []
        if self.easy_bw:
            parts.append(f"IO500 easy {rate_text(self.easy_bw)} on {self.io500}")
        if self.forwarders_bw:
            parts.append(f"forwarder peaks {rate_text(self.forwarders_bw)}")
        if with_osts and self.osts_bw:
            parts.append(f"OST peaks {rate_text(self.osts_bw)}")
        return ", ".join(parts) or "no capacity known"

    def ceiling(self, with_osts: bool = True) -> float | None:
        """The lowest known bandwidth limit (`with_osts`=False when the fix changes the
        OSTs used: their sum then is no limit)."""
        limits = [self.easy_bw, self.forwarders_bw, self.osts_bw if with_osts else None]
        known = [x for x in limits if x]
        return min(known) if known else None


@dataclass(frozen=True)
class CallCost:
    """The job's per-call cost, fitted to its own data calls."""

    calls: int
    bytes: int
    seconds: float  # summed duration of the calls, all ranks
    latency_s: float | None  # fitted per-call time at size 0; None if the fit failed
    latency_se_s: float | None = None  # its standard error, when fitted
    basis: str = ""  # where the per-byte cost came from
    #: the calls collective MPI-IO would merge away: on each shared file, its processes'
    #: calls less one call of them all (independent calls assumed: a trace cannot tell)
    collective_merges: int = 0

    @property
    def mean_s(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0


@dataclass
class Context:
    """Everything the models read besides the report. The call cost and the earlier runs
    are read when a model first asks for them (IOL004's, IOL001's): the other findings'
    jobs cost no such query."""

    capacity: Capacity = field(default_factory=Capacity)
    cores: int = 1  # processes (or nodes when the process count is unknown)
    read_calls: Callable[[], CallCost | None] | None = None
    read_earlier: Callable[[], list[Trial]] | None = None

    @cached_property
    def calls(self) -> CallCost | None:
        return self.read_calls() if self.read_calls else None

    @cached_property
    def earlier(self) -> list[Trial]:
        """The user's finished runs of the same application at the same scale that started
        before this one, with their I/O mode and bandwidth (`advise.trials`)."""
        return self.read_earlier() if self.read_earlier else []


@dataclass(frozen=True)
class Saving:
    seconds: float
    low: float
    high: float
    model: str  # one sentence: what changes, from what evidence
    inputs: dict[str, Any]

    def gain(self, cores: int) -> dict[str, Any]:
        """The `gain` JSON of a finding (3 significant digits: a model, not a stopwatch)."""
        ch = cores / 3600.0
        return {
            "seconds": sig(self.seconds),
            "range_s": [sig(self.low), sig(self.high)],
            "core_hours": sig(self.seconds * ch),
            "core_hours_range": [sig(self.low * ch), sig(self.high * ch)],
            "cores": cores,
            "model": self.model,
            # rounded too: engines sum in different orders (the embedded store, a dataset,
            # Dask), and the same job must get the same finding from each
            "inputs": {k: sig(v) if isinstance(v, float) else v for k, v in self.inputs.items()},
        }


def sig(x: float) -> float:
    return float(f"{x:.3g}")


def rate_text(bps: float) -> str:
    """Bytes/s for a sentence."""
    for unit, size in (("GiB/s", 2**30), ("MiB/s", 2**20), ("KiB/s", 2**10)):
        if bps >= size:
            return f"{bps / size:.1f} {unit}"
    return f"{bps:.0f} B/s"


def saving_of(now_s: float, after: tuple[float, float, float]) -> tuple[float, float, float]:
    """(estimate, low, high) seconds saved when `now_s` becomes `after` (estimate, worst,
    best case times), each clipped to [0, now_s]."""
    est, worst, best = (min(max(now_s - t, 0.0), now_s) for t in after)
    return est, min(est, worst), max(est, best)


def faster(
    now_s: float, nbytes: float, lo_bw: float, hi_bw: float, est_bw: float | None = None
) -> tuple[float, float, float]:
    """Seconds saved moving `nbytes` at a bandwidth between `lo_bw` and `hi_bw` instead
    of in `now_s` (estimate: `est_bw`, else their log-midpoint)."""
    est_bw = est_bw or math.sqrt(lo_bw * hi_bw)
    return saving_of(now_s, (nbytes / est_bw, nbytes / lo_bw, nbytes / hi_bw))


def at_best_rate(t: float, nbytes: float, best: float, what: str, after: str) -> Saving:
    """Moving `nbytes`, which took `t` seconds, at up to `best` bytes/s: the saving from
    the log-midpoint of the two rates, the range from nothing to all of it."""
    now = nbytes / t
    est, lo, hi = faster(t, nbytes, now, max(best, now))
    return Saving(
        est, lo, hi,
        f"{nbytes / 2**30:.1f} GiB {what} in {t:.0f} s ({rate_text(now)}), against up to "
        f"{rate_text(best)} {after}",
        {"data_time_s": round(t, 1), "bytes": nbytes, "bw": now, "best_bw": best},
    )  # fmt: skip


def data_time(report: JobReport) -> float:
    bw = report.bandwidth
    return float(bw.get("read_time_s") or 0.0) + float(bw.get("write_time_s") or 0.0)


def meta_time(report: JobReport) -> float:
    return max(float(report.io_time_s or 0.0) - data_time(report), 0.0)


# ---- the evidence, from the store ------------------------------------------------------


def context(
    store: Store,
    report: JobReport,
    io500: dict[str, Any] | None,
    costs: SystemCosts | None = None,
    batch: Sequence[JobReport] = (),
) -> Context:
    """The context of one job; `io500` is `io500_box(store)` and `costs` a `SystemCosts`,
    both made once per analysis run; `batch` the reports analysed with it (their summaries
    are stored only at the end of the run: an earlier run among them counts too)."""
    return Context(
        capacity=_capacity(store, report, io500),
        cores=int(report.nprocs or report.nodes or 1),
        read_calls=lambda: call_cost(store, report.job_id, costs),
        read_earlier=lambda: earlier_runs(store, report, batch),
    )


def earlier_runs(store: Store, report: JobReport, batch: Sequence[JobReport] = ()) -> list[Trial]:
    """`Context.earlier`: same user, same application, same process count, started
    before, finished; from the store's summaries and the reports of `batch`."""
    from iolens.analyze.advise import Trial, trials, unfinished  # only when asked

    if not report.app or report.start is None:
        return []
    runs = {t.job_id: t for t in trials(store, report.app, report.user)}
    for r in batch:  # this run's analysis replaces a stored summary
        if r.app == report.app and r.user == report.user and r.end is not None:
            bw = float(r.bandwidth.get("bw") or 0.0)
            if bw > 0 and not unfinished(r.state):
                runs[r.job_id] = Trial(
                    r.job_id, r.user, r.start, bw, io_mode=r.io_mode, nprocs=r.nprocs
                )
    return [
        t
        for t in runs.values()
        if t.job_id != report.job_id
        and t.start is not None
        and t.start < report.start
        and t.nprocs == report.nprocs
    ]


def io500_box(store: Store) -> dict[str, Any] | None:
    """The IO500 box of the site's system, when the store holds runs of exactly one
    system (with several, which one a job ran on is not known): bandwidth in bytes/s,
    metadata in ops/s, and the client node count it was measured with."""
    from iolens.analyze.expect import box as bx
    from iolens.analyze.expect.runs import groups, load

    try:
        gs = [g for g in groups(load(store)) if g.used]
    except Exception:  # no io500 tables in an old store: no box
        return None
    if len({g.system for g in gs}) != 1:
        return None
    b = bx.union(g.boxes.get("aggregate") for g in gs)
    nodes = [r.nodes for g in gs for r in g.used if r.nodes]
    if b is None or not nodes:
        return None
    gib = 2**30
    return {
        "system": gs[0].system,
        "nodes": int(min(nodes)),
        "easy_bw": b.bw_hi * gib,
        "hard_bw": b.bw_lo * gib,
        "easy_md": b.md_hi * 1000.0,
        "hard_md": b.md_lo * 1000.0,
    }


def _capacity(store: Store, report: JobReport, io500: dict[str, Any] | None) -> Capacity:
    peaks = {
        r["component_id"]: r["peak_bw"]
        for r in store.query(
            "SELECT component_id, peak_bw FROM components WHERE peak_bw > 0"
        ).to_pylist()
    }
    fwd = [peaks[f] for f in report.forwarders if f in peaks]
    osts = [peaks[o] for o in report.osts if o in peaks]
    site_osts = sorted(
        r["peak_bw"]
        for r in store.query(
            "SELECT peak_bw FROM components WHERE kind = 'ost' AND peak_bw > 0"
        ).to_pylist()
    )
    cap: dict[str, Any] = {
        "forwarders_bw": sum(fwd) if fwd and len(fwd) == len(report.forwarders) else None,
        "osts_bw": sum(osts) if osts and len(osts) == len(report.osts) else None,
        "ost_peak": site_osts[len(site_osts) // 2] if site_osts else None,
    }
    if io500:
        scale = min(1.0, max(report.nodes, 1) / io500["nodes"])
        for k in ("easy_bw", "hard_bw", "easy_md", "hard_md"):
            cap[k] = io500[k] * scale
        cap["io500"] = f"{io500['system']} ({io500['nodes']} nodes, scaled by {scale:.2g})"
    return Capacity(**cap)


#: Calls at least this large are mostly transfer: with nothing to fit, their time per byte
#: is taken as what a byte costs (a little high: it includes their latency).
LARGE_CALL = 2**20
#: How far back other jobs' calls are looked at for what a byte costs on the system.
RATE_WINDOW_DAYS = 30

#: The application's own calls: each file's outermost traced layer (HDF5 over MPI-IO over
#: POSIX, stdio over POSIX), whose requests are the ones a fix makes larger, and whether the
#: file is shared (more than one process touched it: a byte costs more there).
# stdio above POSIX, then the LAYER_LEVELS above both
_RANK = (
    "(CASE {c}layer WHEN 'posix' THEN 0 WHEN 'stdio' THEN 1 ELSE 1 + "
    + layer_level_sql("{c}layer")
    + " END)"
)
_OUTERMOST = f"""
    WITH outer_layer AS (
        SELECT file_id, max({_RANK.format(c="")}) AS l,
               count(DISTINCT (node, pid)) AS procs, procs > 1 AS shared
        FROM client_io WHERE job_id = ? AND op IN ('read', 'write')
          AND NOT {system_file_sql()} GROUP BY file_id
    ), d AS (
        SELECT c.op, c.layer, o.shared, o.procs, c.size, c."count"::DOUBLE AS n,
               (c."count" * c.size)::DOUBLE AS nb, c.dur_ns::DOUBLE / 1e9 AS t
        FROM client_io c JOIN outer_layer o USING (file_id)
        WHERE c.job_id = ? AND c.op IN ('read', 'write') AND c.dur_ns IS NOT NULL
          AND {_RANK.format(c="c.")} = o.l
    )
"""
#: Sums of the least-squares fit t = a*n + b*nb over records (n calls, nb bytes, t s).
_FIT_SUMS = """sum(n * n) AS nn, sum(n * nb) AS nnb, sum(nb * nb) AS bb, sum(t * n) AS tn,
    sum(t * nb) AS tb, sum(t * t) AS tt, count(*) AS m"""


@dataclass(frozen=True)
class Fit:
    """t = latency * calls + cost * bytes, per record; `se`: the latency's standard error."""

    latency: float
    cost: float  # seconds per byte
    se: float

    @property
    def determined(self) -> bool:
        """Both parts told apart: sizes spread enough for the latency to be known to 50 %."""
        return self.cost > 0 and self.se <= max(0.5 * self.latency, 1e-7)


def fit(sums: dict[str, Any]) -> Fit | None:
    """The fit from `_FIT_SUMS` (no intercept: a record of no calls takes no time); None
    when the sizes do not tell latency from transfer, or larger calls were not slower."""
    if not sums.get("m") or int(sums["m"]) <= 2:
        return None
    nn, nnb, bb, tn, tb, tt = (float(sums[k] or 0) for k in ("nn", "nnb", "bb", "tn", "tb", "tt"))
    det = nn * bb - nnb * nnb
    if det <= 1e-9 * nn * bb:
        return None
    a = (tn * bb - tb * nnb) / det
    b = (nn * tb - nnb * tn) / det
    if b < 0:  # larger calls were not slower: nothing to tell the parts apart by
        return None
    if a < 0:  # small calls cheaper than their bytes' share: all transfer, no overhead
        return Fit(0.0, tb / bb, 0.0)
    rss = tt - 2 * a * tn - 2 * b * tb + a * a * nn + 2 * a * b * nnb + b * b * bb
    return Fit(a, b, math.sqrt(max(rss, 0.0) / (int(sums["m"]) - 2) * bb / det))


def call_cost(store: Store, job_id: str, costs: SystemCosts | None = None) -> CallCost | None:
    """The job's data calls, and the part of each call's time that is per-call overhead.

    A call costs latency + size x (seconds per byte). The calls are the application's:
    each file's outermost traced layer (an MPI-IO call's time includes the POSIX calls
    under it and its collective waits). In order of preference:

    1. a least-squares fit of the job's own records, when their sizes spread enough to
       tell the two parts apart (`Fit.determined`);
    2. the cost per byte the same fit finds over other jobs' records of the same layer,
       direction and sharing (a shared file's bytes cost more) on this store in the
       RATE_WINDOW_DAYS up to the end of the job's day (`SystemCosts`), or the time per
       byte of their calls of >= LARGE_CALL bytes (a job of one request size cannot tell
       its latency from its transfer time, the system's other jobs can); the latency is
       then the rest of the job's time per call;
    3. all of a call's time counted as its latency (an upper bound on the overhead).
    """
    # one pass: the fit sums per stream, and the call count of each request size
    rows = store.query(
        _OUTERMOST + "SELECT op, layer, shared, size, sum(n) AS calls, sum(nb) AS nbytes, "
        f"sum(t) AS secs, sum(n / procs) AS per_proc, {_FIT_SUMS} FROM d "
        "GROUP BY GROUPING SETS ((op, layer, shared), (size)) ORDER BY op, layer, shared",
        [job_id, job_id],
    ).to_pylist()
    per = [r for r in rows if r["op"] is not None]
    sizes = [(int(r["size"] or 0), int(r["calls"] or 0)) for r in rows if r["op"] is None]
    calls = sum(int(r["calls"] or 0) for r in per)
    if not calls:
        return None
    nbytes = sum(int(r["nbytes"] or 0) for r in per)
    secs = sum(float(r["secs"] or 0.0) for r in per)
    merges = round(
        sum(float(r["calls"] or 0) - float(r["per_proc"] or 0) for r in per
            if r["layer"] == "mpiio" and r["shared"])
    )  # fmt: skip
    own = fit(_added(per))
    if own is not None and own.determined and _spread(sizes, calls):
        return CallCost(
            calls, nbytes, secs, own.latency, own.se, "fitted to the job's calls", merges
        )
    cost_of = (costs or SystemCosts(store)).for_job(job_id)
    transfer, known, basis = 0.0, 0, []
    for r in per:
        cost = cost_of.get((r["op"], r["layer"], r["shared"]))
        if cost is None:  # a side stream (a library's reads): its time counts as overhead
            continue
        known += int(r["calls"] or 0)
        transfer += float(r["nbytes"] or 0) * cost
        if (r["calls"] or 0) >= calls / 10:  # the streams that matter, in the sentence
            kind = "shared-file " if r["shared"] else ""
            basis.append(f"{r['layer']} {kind}{r['op']}s at {rate_text(1 / cost)}")
    if known >= calls / 2:
        latency = max(secs - transfer, 0.0) / calls
        text = "transfer at the rate other jobs' calls show: " + "; ".join(basis)
        return CallCost(calls, nbytes, secs, latency, None, text, merges)
    return CallCost(calls, nbytes, secs, secs / calls, None, "all of each call counted", merges)


_SUM_KEYS = ("nn", "nnb", "bb", "tn", "tb", "tt", "m", "big_t", "big_b")


def _added(rows: list[dict[str, Any]], minus: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """The fit sums of `rows` added up, less those of `minus` (the sums are additive)."""
    out = {k: sum(float(r.get(k) or 0) for r in rows) for k in _SUM_KEYS}
    for r in minus:
        for k in _SUM_KEYS:
            out[k] -= float(r.get(k) or 0)
    return out


def _spread(sizes: list[tuple[int, int]], calls: int) -> bool:
    """Whether the job's calls come in sizes apart enough to fit both parts: its two most
    frequent sizes each hold >= 10 % of its calls and differ 4x or more (a few odd-sized
    calls of a library beside one request size tell nothing)."""
    top = sorted(sizes, key=lambda sk: -sk[1])[:2]
    if len(top) < 2 or top[1][1] < 0.1 * calls:
        return False
    lo, hi = sorted(max(size, 1) for size, _k in top)
    return hi >= 4 * lo


#: Fit sums per (op, layer, shared) of client records; `{where}` picks the records.
_COST_SUMS = f"""
    WITH c AS (SELECT * FROM client_io
               WHERE op IN ('read', 'write') AND dur_ns > 0 AND {{where}}
                 AND NOT {system_file_sql()}),
    sh AS (SELECT job_id, file_id, count(DISTINCT (node, pid)) > 1 AS shared
           FROM c GROUP BY job_id, file_id),
    d AS (SELECT c.op, c.layer, sh.shared, c."count"::DOUBLE AS n,
                 (c."count" * c.size)::DOUBLE AS nb, c.dur_ns::DOUBLE / 1e9 AS t
          FROM c JOIN sh USING (job_id, file_id))
    SELECT op, layer, shared, {_FIT_SUMS},
           sum(t) FILTER (WHERE nb >= n * {LARGE_CALL}) AS big_t,
           sum(nb) FILTER (WHERE nb >= n * {LARGE_CALL}) AS big_b
    FROM d GROUP BY ALL
"""


class SystemCosts:
    """Seconds per byte per (op, layer, shared file), fitted over the other jobs' records
    of the RATE_WINDOW_DAYS up to the end (UTC midnight) of a job's day.

    The window's sums are read once per day for a whole analysis run and the job's own
    records subtracted (the fit sums are additive), so a run over many jobs scans the
    system's records once per day of job ends, not once per job."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._days: dict[datetime, list[dict[str, Any]]] = {}

    def for_job(self, job_id: str) -> dict[tuple[str, str, bool], float]:
        row = self.store.query(
            'SELECT coalesce("end", now()::TIMESTAMP) AS e FROM jobs WHERE job_id = ?', [job_id]
        ).to_pylist()
        if not row:
            return {}
        e = row[0]["e"]
        day = datetime(e.year, e.month, e.day) + timedelta(days=1)
        if day not in self._days:
            self._days[day] = self.store.query(
                _COST_SUMS.format(where="t_start < ? AND t_start >= ?"),
                [day, day - timedelta(days=RATE_WINDOW_DAYS)],
            ).to_pylist()
        own = self.store.query(
            _COST_SUMS.format(where="job_id = ? AND t_start < ? AND t_start >= ?"),
            [job_id, day, day - timedelta(days=RATE_WINDOW_DAYS)],
        ).to_pylist()
        out = {}
        for r in self._days[day]:
            key = (r["op"], r["layer"], bool(r["shared"]))
            mine = [o for o in own if (o["op"], o["layer"], bool(o["shared"])) == key]
            sums = _added([r], mine)
            f = fit(sums) if sums["m"] > 2 else None
            if f is not None and f.cost > 0:
                out[key] = f.cost
            elif sums["big_b"] > 0 and sums["big_t"] > 0:  # large calls of one size
                out[key] = sums["big_t"] / sums["big_b"]
        return out
