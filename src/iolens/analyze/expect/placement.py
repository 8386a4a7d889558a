"""Placing an application's run in the box of expectation (the paper's workflow, step 2).

`place_job(box, bandwidth, md_rate)` is pure: bandwidth in GiB/s and metadata rate in
kIOPS (the box's own units), either None when the job did not exercise that axis. The
verdict is one of

* ``below worst case`` — slower than IO500's 'hard' test on this system on some axis: the
  storage does better even for its worst pattern, so the application (or a layer above the
  file system) is the likely problem, unless the system was degraded while it ran;
* ``within`` — between worst and best case: the system delivers what this access pattern
  gets; moving toward the best case is application tuning;
* ``near best case`` — at 80 % or more of the 'easy' result on every axis it exercised: the
  application is well tuned, the system's capacity is the limit;
* ``above best case`` — faster than IO500's 'easy' on some axis. IO500 defeats caches (it
  runs for 300 s and writes more than memory holds), so such a run was served by the page
  cache: the paper's short BTIO run landed there until IO500 itself ran for 2 s. It says
  nothing about the storage and is never praised as well tuned.

The box is scaled to the job's node count (`scaled`): IO500's aggregate results come from
its own number of client nodes, and a job on a quarter of them can expect a quarter of
the bandwidth and metadata rate (never more than IO500's: more nodes than IO500 used may
already saturate the servers). Besides the placed metadata rate (ops over the seconds
with metadata ops), the paper's own formula is given: all I/O operations over the
metadata time (Darshan's F_META_TIME; traced: the slowest rank's I/O time that was
neither reading nor writing), which the paper found fits MPI-IO runs but not POSIX ones.

`job_point` reads a job's point from the store (the cached per-job summary, else the
report), and `expected_gain` turns a placement into the `gain` JSON findings carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iolens.analyze.expect.box import BW_UNIT, MD_UNIT, Box
from iolens.store.base import Store

BELOW = "below worst case"
WITHIN = "within"
NEAR_BEST = "near best case"
CACHED = "above best case"
VERDICTS = (BELOW, WITHIN, NEAR_BEST, CACHED)
#: "near best case" from this fraction of the easy result upward.
NEAR = 0.8
#: Fewer metadata operations than this say nothing about a job's metadata rate.
MIN_MD_OPS = 1000
GIB = 2**30


@dataclass
class AxisPlacement:
    axis: str  # bandwidth | metadata
    value: float
    unit: str
    worst: float  # the box's hard (lo) side
    best: float  # the box's easy (hi) side
    position: str  # below | within | near_best | above
    fraction_of_best: float  # value / best


@dataclass
class Placement:
    verdict: str | None  # one of VERDICTS; None when the job has nothing to place
    target: str | None  # who should act: application | system
    meaning: str
    axes: list[AxisPlacement] = field(default_factory=list)
    gain_factor: float | None = None  # best-case bandwidth / the job's, when > 1


def _axis(axis: str, value: float, unit: str, lo: float, hi: float) -> AxisPlacement:
    if value < lo:
        pos = "below"
    elif value > hi:
        pos = "above"
    elif value >= NEAR * hi:
        pos = "near_best"
    else:
        pos = "within"
    return AxisPlacement(axis, value, unit, lo, hi, pos, value / hi if hi > 0 else float("inf"))


def place_job(
    box: Box | None, bandwidth: float | None, md_rate: float | None, system: str = "this system"
) -> Placement:
    """Verdict for a job at (`bandwidth` GiB/s, `md_rate` kIOPS) against `box`."""
    if box is None:
        return Placement(None, None, f"no IO500 box for {system}: import IO500 runs first")
    axes = []
    if bandwidth is not None and bandwidth > 0:
        axes.append(_axis("bandwidth", bandwidth, BW_UNIT, box.bw_lo, box.bw_hi))
    if md_rate is not None and md_rate > 0:
        axes.append(_axis("metadata", md_rate, MD_UNIT, box.md_lo, box.md_hi))
    if not axes:
        return Placement(None, None, "the job did no I/O to place in the box")
    gain = None
    bw = next((a for a in axes if a.axis == "bandwidth"), None)
    if bw is not None and bw.value < bw.best:
        gain = bw.best / bw.value
    below = [a for a in axes if a.position == "below"]
    above = [a for a in axes if a.position == "above"]
    if below:
        names = " and ".join(
            f"{a.axis} ({a.value:,.3g} {a.unit} < worst case {a.worst:,.3g})" for a in below
        )
        meaning = (
            f"Its {names} is below what even IO500's 'hard' test gets on {system}. The storage "
            "does better than this for its worst access pattern, so the application is the "
            "likely problem (small or unaligned requests, a single writer, serialised or "
            "metadata-heavy I/O, the I/O library) — unless the system was degraded while it "
            "ran: check `iolens anomalies` for the job's window before tuning."
        )
        return Placement(BELOW, "application", meaning, axes, gain)
    if above:
        names = " and ".join(
            f"{a.axis} ({a.value:,.3g} {a.unit} > best case {a.best:,.3g})" for a in above
        )
        meaning = (
            f"Its {names} beats IO500's 'easy' test on {system}, which no storage access "
            "can: IO500 defeats caches (it runs for 300 s and writes more than memory "
            "holds), so this run was served by the page cache (or a burst buffer), not the "
            "file system. It is not a sign of good tuning and says nothing about the "
            "storage: to measure it, move more data than the nodes' memory, run longer, "
            "or drop caches between writing and reading back."
        )
        return Placement(CACHED, "application", meaning, axes, gain)
    if all(a.position == "near_best" for a in axes):
        meaning = (
            f"Close to IO500's best case on {system}: the application's I/O is already well "
            "tuned and it is not an application problem. If it is still too slow, the "
            "limit is the system's capacity (more OSTs or stripes, more nodes, a faster "
            "tier) or the amount of I/O itself."
        )
        return Placement(NEAR_BEST, "system", meaning, axes, gain)
    up = f" (up to {gain:.1f}x bandwidth)" if gain and gain > 1.05 else ""
    meaning = (
        f"Between IO500's worst and best case on {system}: the system delivers what it "
        "should for this access pattern, so it is not a system problem. Where the job lands "
        "in the box is the application's doing: larger aligned requests, file-per-process or "
        f"collective I/O and fewer metadata operations move it toward the best case{up}."
    )
    return Placement(WITHIN, "application", meaning, axes, gain)


def scaled(box: Box, job_nodes: int | None, io500_nodes: float | None) -> tuple[Box, float]:
    """`box` for a job on `job_nodes` client nodes, and the factor applied: IO500's results
    times job nodes / IO500's nodes, at most 1 (unknown node counts: unscaled)."""
    if not job_nodes or not io500_nodes or io500_nodes <= 0:
        return box, 1.0
    f = min(1.0, job_nodes / io500_nodes)
    return Box(box.bw_lo * f, box.bw_hi * f, box.md_lo * f, box.md_hi * f), f


def paper_md_rate(ops: float, meta_time_s: float | None) -> float | None:
    """The paper's metadata rate in kIOPS: all I/O operations / the metadata time."""
    if not ops or not meta_time_s or meta_time_s <= 0:
        return None
    return ops / meta_time_s / 1000.0


def expected_gain(p: Placement, basis: str = "IO500 easy-case bandwidth") -> dict[str, Any] | None:
    """The `gain` object of a finding ({"metric", "factor", "basis"}) this placement
    supports: how much faster the job's bandwidth could be at the system's best case."""
    if p.gain_factor is None or p.gain_factor <= 1.0 or p.verdict == NEAR_BEST:
        return None
    return {"metric": "bandwidth", "factor": round(p.gain_factor, 2), "basis": basis}


@dataclass
class JobPoint:
    job_id: str
    bandwidth: float | None  # GiB/s over the seconds the job moved data
    md_rate: float | None  # kIOPS over the seconds with metadata ops; None below MIN_MD_OPS
    read_bw: float | None  # GiB/s
    write_bw: float | None
    read_bytes: int
    write_bytes: int
    md_ops: int
    layer: str | None  # mpiio when any record came through MPI-IO, else posix
    nodes: int = 0  # client nodes of the job (the scheduler's, else those that did I/O)
    ops: int = 0  # data + metadata operations
    meta_time_s: float | None = None  # the slowest rank's I/O time neither reading nor writing
    paper_md_rate: float | None = None  # kIOPS: ops / meta_time_s (the paper's formula)


def point_of(
    read_bytes: float,
    write_bytes: float,
    read_bw_avg: float | None,
    write_bw_avg: float | None,
    md_ops: float,
    md_ops_rate: float | None,
) -> tuple[float | None, float | None, float | None, float | None]:
    """(bandwidth, md_rate, read_bw, write_bw) in the box's units from per-job figures in
    bytes/s and ops/s: bandwidth is all bytes over the seconds spent reading or writing."""
    seconds = 0.0
    if read_bytes and read_bw_avg:
        seconds += read_bytes / read_bw_avg
    if write_bytes and write_bw_avg:
        seconds += write_bytes / write_bw_avg
    moved = (read_bytes or 0) + (write_bytes or 0)
    bw = moved / seconds / GIB if seconds > 0 and moved > 0 else None
    md = md_ops_rate / 1000.0 if md_ops >= MIN_MD_OPS and md_ops_rate else None
    rbw = read_bw_avg / GIB if read_bytes and read_bw_avg else None
    wbw = write_bw_avg / GIB if write_bytes and write_bw_avg else None
    return bw, md, rbw, wbw


def job_point(store: Store, job_id: str) -> JobPoint:
    """A job's place on the box's axes, from its client records (the per-job report).

    Both axes are rates while the job did that kind of I/O, as IO500's are: bandwidth over
    the seconds it read or wrote, metadata operations over the seconds it made them (not
    over all its I/O time, which would make a checkpointing job look slow at metadata).
    A job known only from Darshan falls back to its `job_factors` bandwidth.
    """
    from iolens.analyze import report

    rep = report.build(store, job_id, with_series=True)  # NotFound for an unknown job
    md_rate = None
    if rep.series is not None and rep.md_ops:
        busy = int((rep.series.md > 0).sum())
        md_rate = float(rep.series.md.sum()) / (busy * report.BIN_S) if busy else None
    bw, md, rbw, wbw = point_of(
        rep.read_bytes, rep.write_bytes, rep.read_bw_avg, rep.write_bw_avg, rep.md_ops, md_rate
    )
    if bw is None:
        bw = _darshan_bandwidth(store, job_id)
    layers = set(
        store.query("SELECT DISTINCT layer FROM client_io WHERE job_id = ?", [job_id])
        .column("layer")
        .to_pylist()
    )
    layer = "mpiio" if "mpiio" in layers else ("posix" if layers else None)
    b = rep.bandwidth or {}
    meta = None
    if b.get("io_time_s"):
        data_s = (b.get("read_time_s") or 0.0) + (b.get("write_time_s") or 0.0)
        meta = max(0.0, b["io_time_s"] - data_s)
    ops = int(rep.read_ops + rep.write_ops + rep.md_ops)
    return JobPoint(
        job_id, bw, md, rbw, wbw, int(rep.read_bytes), int(rep.write_bytes), int(rep.md_ops),
        layer, rep.nodes or rep.io_nodes, ops, meta, paper_md_rate(ops, meta),
    )  # fmt: skip


def _darshan_bandwidth(store: Store, job_id: str) -> float | None:
    """GiB/s from the Darshan factors (`job_factors.bandwidth`, bytes/s), when there."""
    rows = store.query(
        "SELECT bandwidth FROM job_factors WHERE job_id = ? AND bandwidth > 0 "
        "ORDER BY computed DESC NULLS LAST LIMIT 1",
        [job_id],
    ).to_pylist()
    return float(rows[0]["bandwidth"]) / GIB if rows else None
