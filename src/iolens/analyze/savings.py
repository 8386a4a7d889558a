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
* **the job's earlier runs** (IOL006): how long phases of the same volume took before.

The model is deliberately simple: a fix changes one cost (per-call overhead, a
bandwidth, a number of bytes or operations) and the saving is the time that cost takes
now minus the time it would take after. Where only a ceiling is known, the estimate is
the log-midpoint between the job's own rate and that ceiling, and the range runs from
the job's current rate (nothing gained) ... to the ceiling (everything gained): the
range is the honest part. A saving never exceeds the time the fixed cost takes now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

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
            parts.append(f"IO500 easy {rate(self.easy_bw)} on {self.io500}")
        if self.forwarders_bw:
            parts.append(f"forwarder peaks {rate(self.forwarders_bw)}")
        if with_osts and self.osts_bw:
            parts.append(f"OST peaks {rate(self.osts_bw)}")
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
    latency_se_s: float | None = None  # its standard error

    @property
    def mean_s(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0


@dataclass
class Context:
    """Everything the models read besides the report."""

    capacity: Capacity = field(default_factory=Capacity)
    calls: CallCost | None = None
    cores: int = 1  # processes (or nodes when the process count is unknown)


@dataclass(frozen=True)
class Saving:
    seconds: float
    low: float
    high: float
    model: str  # one sentence: what changes, from what evidence
    inputs: dict[str, Any]

    def gain(self, cores: int) -> dict[str, Any]:
        """The `gain` JSON of a finding."""
        ch = cores / 3600.0
        return {
            "seconds": round(self.seconds, 1),
            "range_s": [round(self.low, 1), round(self.high, 1)],
            "core_hours": round(self.seconds * ch, 3),
            "core_hours_range": [round(self.low * ch, 3), round(self.high * ch, 3)],
            "cores": cores,
            "model": self.model,
            "inputs": self.inputs,
        }


def rate(bps: float) -> str:
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


def data_time(report: JobReport) -> float:
    bw = report.bandwidth
    return float(bw.get("read_time_s") or 0.0) + float(bw.get("write_time_s") or 0.0)


def meta_time(report: JobReport) -> float:
    return max(float(report.io_time_s or 0.0) - data_time(report), 0.0)


# ---- the evidence, from the store ------------------------------------------------------


def context(store: Store, report: JobReport, io500: dict[str, Any] | None) -> Context:
    """The context of one job; `io500` is `io500_box(store)` (read once per analysis)."""
    return Context(
        capacity=_capacity(store, report, io500),
        calls=call_cost(store, report.job_id),
        cores=int(report.nprocs or report.nodes or 1),
    )


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


def call_cost(store: Store, job_id: str) -> CallCost | None:
    """The job's data calls and a least-squares fit of their duration: per record of
    `count` calls of `size` bytes taking `dur_ns` in all, dur = count * (a + b * size);
    `a` is the per-call latency. Records that repeat a layer's bytes (MPI-IO over POSIX)
    are counted at the lowest layer, as the report does."""
    row = store.query(
        """
        WITH lowest AS (
            SELECT file_id, min(CASE layer WHEN 'posix' THEN 0 WHEN 'stdio' THEN 1
                                           ELSE 2 END) AS l
            FROM client_io WHERE job_id = ? AND op IN ('read', 'write') GROUP BY file_id
        ), d AS (
            SELECT c."count"::DOUBLE AS n, (c."count" * c.size)::DOUBLE AS nb,
                   c.dur_ns::DOUBLE / 1e9 AS t
            FROM client_io c JOIN lowest USING (file_id)
            WHERE c.job_id = ? AND c.op IN ('read', 'write') AND c.dur_ns IS NOT NULL
              AND (CASE c.layer WHEN 'posix' THEN 0 WHEN 'stdio' THEN 1 ELSE 2 END) = lowest.l
        )
        SELECT sum(n) AS calls, sum(nb) AS nbytes, sum(t) AS secs,
               sum(n * n) AS nn, sum(n * nb) AS nnb, sum(nb * nb) AS bb,
               sum(t * n) AS tn, sum(t * nb) AS tb, sum(t * t) AS tt, count(*) AS m
        FROM d
        """,
        [job_id, job_id],
    ).to_pylist()[0]
    if not row["calls"]:
        return None
    # normal equations of t = a*n + b*nb (no intercept: a record of 0 calls takes 0 s)
    nn, nnb, bb, tn, tb = (float(row[k]) for k in ("nn", "nnb", "bb", "tn", "tb"))
    det = nn * bb - nnb * nnb
    tt, m = float(row["tt"]), int(row["m"])
    latency = se = None
    if m > 2 and det > 1e-9 * nn * bb:
        a = (tn * bb - tb * nnb) / det
        b = (nn * tb - nnb * tn) / det
        if a >= 0 and b >= 0:
            latency = a
            rss = tt - 2 * a * tn - 2 * b * tb + a * a * nn + 2 * a * b * nnb + b * b * bb
            se = math.sqrt(max(rss, 0.0) / (m - 2) * bb / det)
        elif b >= 0:  # the calls' time is all transfer
            latency = 0.0
    if latency is None:  # one size only, or larger calls not slower: all overhead
        latency = float(row["secs"] or 0.0) / float(row["calls"])
    return CallCost(
        int(row["calls"]), int(row["nbytes"] or 0), float(row["secs"] or 0), latency, se
    )
