"""Who slowed whom: culprit jobs for every job whose I/O waited on a shared component.

Beacon (section 4.1, Table 5) found that a job's I/O is slowed by the neighbours that load
the same forwarding node, OST or metadata server while it runs, and most of all by N-1
jobs, whose slow shared-file requests hold forwarder threads. For each second of a
victim's I/O bursts this module estimates

* how much the victim was slowed: 1 - (what it completed) / (what it asked for, i.e. the
  work it still had, capped by what its processes can drive);
* which component held it back: the forwarder whose thread pool gave it the smallest
  fraction of its demand, an OST loaded beyond its capacity, or (metadata bursts) the MDS;
* each other job's share of that component: of the forwarder's thread time (a FIFO thread
  pool shares threads by outstanding requests x service time, so it is reconstructed by
  water-filling), of the OST's offered load, or of the MDS's metadata ops.

A culprit's delay is the victim's slowdown times the culprit's share, summed over the
seconds they overlapped. A pair is kept when the culprit cost the victim at least
`MIN_DELAY_S` and `MIN_SHARE` of its I/O time. The inputs are server samples only: per-job
rows (forwarders attribute requests by client node, jobstats on OSTs and the MDS) and the
component totals (queue length and active threads give the offered load, service time the
capacity). N-1 requests' longer thread holding and OST lock penalty are fitted from the
same samples where possible.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import defaultdict
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iolens.analyze.jobs.usage import (
    EVERYTHING,
    Burst,
    Capacity,
    Span,
    burst_windows,
    bursts,
    capacities,
)
from iolens.analyze.jobs.usage import job_rows as usage_rows
from iolens.model.schema import ANOMALIES, INTERFERENCE
from iolens.store.base import Store

MIN_DELAY_S = 10.0  # a culprit must cost the victim at least this much I/O time ...
MIN_SHARE = 0.25  # ... and at least this share of the victim's I/O time
MIN_SLOWDOWN = 0.05  # seconds slowed by less than this are noise
MINOR_COMPONENT = 0.05  # a kept pair's components carrying less of its delay are not listed
SATURATED = 0.95  # utilisation above which a component is taken as the limit
# Fallbacks when the samples cannot fit them: N-1 requests hold a forwarder thread ~6x
# longer (they wait on a shared file at the backend) and cost an OST 3x (writes) or 1.5x
# (reads) in extent-lock traffic; a metadata op costs a forwarder 1/2.5 of a data request.
DEFAULT_N1_FWD = 6.0
DEFAULT_N1_OST = {"write": 3.0, "read": 1.5}
DEFAULT_MD_PER_OP = 0.4
# An N-1 job is a forwarder-wide anomaly (`n1_interference`) when it spans at least this
# share of the compute nodes behind the forwarder: it then floods the thread pool
# (Beacon: "particularly when N is large").
N1_EPISODE_NODE_SHARE = 0.5
MIN_RATE_SAMPLES = 10  # unthrottled seconds needed to trust a per-process peak rate
SMALL_REQUEST = 64 * 1024  # below this a burst is IOPS-bound ("high_iops")
DETECTOR = "interference"


@dataclass
class Utilisation:
    """Per component, per second from `t0`: offered load / capacity, and the capacity factor."""

    t0: int
    n: int
    rho: dict[str, np.ndarray]
    capacity: dict[str, np.ndarray]
    kind: dict[str, str]

    def of(self, component: str) -> np.ndarray:
        return self.rho.get(component, np.zeros(self.n))

    def cap(self, component: str) -> np.ndarray:
        return self.capacity.get(component, np.ones(self.n))


def utilisation(store: Store, t0: int, n: int) -> Utilisation:
    """Offered load from the component totals.

    Agents report active threads (threads x min(1, load)) and the queue, which grows by the
    thread count per unit of overload, so load = active/threads below saturation and
    1 + queue/threads above it. The service time rises as capacity falls (a degraded
    component), so capacity = best service time / current service time.
    """
    rows = store.query(
        "SELECT kind, component_id, CAST(floor(epoch(ts) - interval_s) AS BIGINT) AS sec, "
        "coalesce(queue_len, 0) AS q, coalesce(active_threads, 0) AS a, service_us AS s "
        "FROM server_samples WHERE job_id IS NULL "
        "AND kind IN ('forwarder', 'ost', 'mds', 'mdt') "
        "AND epoch(ts) > ? AND epoch(ts) <= ? ORDER BY component_id, sec",
        [t0, t0 + n + 1],
    )
    comp = rows.column("component_id").to_numpy(zero_copy_only=False)
    kinds = rows.column("kind").to_numpy(zero_copy_only=False)
    sec = rows.column("sec").to_numpy()
    q = rows.column("q").to_numpy()
    a = rows.column("a").to_numpy()
    s = rows.column("s").to_numpy(zero_copy_only=False).astype(float)
    out = Utilisation(t0, n, {}, {}, {})
    if len(comp) == 0:
        return out
    cut = np.nonzero(comp[1:] != comp[:-1])[0] + 1
    for i, j in zip(np.r_[0, cut], np.r_[cut, len(comp)], strict=True):
        name = str(comp[i])
        threads = max(1.0, float(a[i:j].max()))
        rho = np.where(a[i:j] < threads * (1 - 1e-9), a[i:j] / threads, 1 + q[i:j] / threads)
        svc = np.where(np.isfinite(s[i:j]) & (s[i:j] > 0), s[i:j], np.nan)
        best = np.nanmin(svc) if np.isfinite(svc).any() else 1.0
        idx = sec[i:j] - t0
        ok = (idx >= 0) & (idx < n)
        out.rho[name] = np.zeros(n)
        out.rho[name][idx[ok]] = rho[ok]
        out.capacity[name] = np.ones(n)
        out.capacity[name][idx[ok]] = np.nan_to_num(best / svc[ok], nan=1.0)
        out.kind[name] = str(kinds[i])
    return out


@dataclass
class Calibration:
    """Costs the samples reveal only indirectly, fitted on saturated / idle seconds."""

    n1_fwd: float = DEFAULT_N1_FWD
    n1_ost: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_N1_OST))
    md_per_op: dict[str, float] = field(default_factory=dict)  # forwarder s per metadata op
    proc_bw: float | None = None  # bytes/s one process drives when nothing limits it


def _median(values: list[np.ndarray], minimum: int = 10) -> float | None:
    v = np.concatenate(values) if values else np.zeros(0)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) >= minimum else None


def _free(b: Burst, u: Utilisation) -> np.ndarray:
    """Seconds in which nothing the burst used was saturated."""
    sl = slice(b.start - u.t0, b.end - u.t0)
    ok = np.ones(b.duration, bool)
    for c in (*b.fwd_work, *b.ost_work):
        ok &= u.of(c)[sl] < SATURATED
    return ok


def _mds(u: Utilisation) -> str | None:
    return next((c for c, k in u.kind.items() if k in ("mds", "mdt")), None)


def calibrate(found: list[Burst], u: Utilisation, caps: dict[str, Capacity]) -> Calibration:
    """Fit per-process peak rates and the N-1 and metadata costs from the samples.

    * per-process bandwidth: data bursts progressing below their remaining work in seconds
      when nothing they use is saturated are limited by their processes; the top of that
      distribution is what one process drives;
    * forwarder cost of a metadata op: the load of idle-ish forwarders not explained by data;
    * N-1 inflation: on forwarders (OSTs) saturated mostly by N-1 demand, the offered load
      not explained by the other jobs' demand, per unit of N-1 demand at nominal cost.
    """
    cal = Calibration()
    bw = [
        b.done[ok] * b.request_size / b.nprocs
        for b in found
        if b.kind != "meta"
        for ok in [_free(b, u) & (b.done < 0.9 * b.remaining)]
    ]
    v = np.concatenate(bw) if bw else np.zeros(0)
    if len(v) >= MIN_RATE_SAMPLES:
        cal.proc_bw = float(np.percentile(v, 99))
    # Demands per component and second, split by N-1 or not.
    n = u.n
    plain: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    n1: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    used: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))  # non-N-1, served
    md: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    for b in found:
        sl = slice(b.start - u.t0, b.end - u.t0)
        ask = ask_of(b, cal)
        for f, (nb, no) in b.fwd_work.items():
            if f not in caps or no <= 0:
                continue
            unit = caps[f].cost(nb, no) / b.units
            (n1 if b.n1 else plain)[f][sl] += ask * unit
            if not b.n1:
                used[f][sl] += b.done * unit
            if b.kind == "meta":
                md[f][sl] += b.done * b.md_ops / b.units * (no / b.units)
        for o, (nb, no) in b.ost_work.items():
            if o in caps and b.n1:
                n1[f"{o}:{b.kind}"][sl] += ask * caps[o].cost(nb, no) / b.units
            elif o in caps:
                plain[o][sl] += ask * caps[o].cost(nb, no) / b.units
    fwd_fit, md_fit = [], []
    ost_fit: dict[str, list[np.ndarray]] = {"read": [], "write": []}
    for c, rho in u.rho.items():
        cap = u.cap(c)
        total = rho * cap
        if u.kind[c] == "forwarder":
            idle = (rho > 0.05) & (rho < 0.9) & (cap > 0.99) & (md[c] > 100) & (n1[c] == 0)
            md_fit.append((total[idle] - used[c][idle]) / md[c][idle])
            sat = (rho > 1.2) & (rho < 250) & (cap > 0.99) & (md[c] == 0)
            sat &= n1[c] > 0.3 * (n1[c] + plain[c])
            fwd_fit.append((total[sat] - plain[c][sat]) / n1[c][sat])
        elif u.kind[c] == "ost":
            for kind in ("read", "write"):
                other = n1.get(f"{c}:{'write' if kind == 'read' else 'read'}", np.zeros(n))
                mine = n1.get(f"{c}:{kind}", np.zeros(n))
                sat = (rho > 1.2) & (rho < 250) & (cap > 0.99) & (other == 0)
                sat &= mine > 0.5 * (mine + plain[c])
                ost_fit[kind].append((total[sat] - plain[c][sat]) / mine[sat])
    # An N-1 request never costs less than a plain one: a fit below 1 means the samples
    # showed no N-1 penalty (a server without extent locks), not a discount.
    cal.n1_fwd = max(1.0, _median(fwd_fit) or DEFAULT_N1_FWD)
    for kind in ("read", "write"):
        cal.n1_ost[kind] = max(1.0, _median(ost_fit[kind]) or DEFAULT_N1_OST[kind])
    md_cost = _median(md_fit, minimum=20)
    for f, cap in caps.items():
        if md_cost is not None and md_cost > 0:
            cal.md_per_op[f] = md_cost
        else:
            cal.md_per_op[f] = DEFAULT_MD_PER_OP / cap.ops
    return cal


def rate_of(b: Burst, cal: Calibration) -> float:
    """Units/s the burst's processes could drive if nothing else limited them."""
    if b.kind != "meta" and cal.proc_bw and b.request_size > 0:
        return cal.proc_bw * b.nprocs / b.request_size
    return float("inf")


def ask_of(b: Burst, cal: Calibration) -> np.ndarray:
    """Units the burst asks for each second: its remaining work, capped by what its
    processes can drive."""
    return np.minimum(b.remaining, rate_of(b, cal))


def water_fill(
    sec: np.ndarray, demand: np.ndarray, weight: np.ndarray, capacity: np.ndarray
) -> np.ndarray:
    """Max-min fair shares of a capacity per second, weighted, never above demand.

    Entries are (second, demand, weight); `capacity` is indexed by second. Vectorised over
    all seconds at once: within a second, entries sorted by demand/weight are satisfied
    while their demand fits the fair level left for them; the rest share what is left in
    proportion to their weights.
    """
    n = len(sec)
    if n == 0:
        return np.zeros(0)
    ratio = demand / np.maximum(weight, 1e-300)
    order = np.lexsort((ratio, sec))
    s, d, w, r = sec[order], demand[order], weight[order], ratio[order]
    starts = np.r_[0, np.nonzero(np.diff(s))[0] + 1]
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    cd, cw = np.cumsum(d), np.cumsum(w)
    d_before = cd - d - np.r_[0, cd][starts][group]
    w_from = np.add.reduceat(w, starts)[group] - (cw - w - np.r_[0, cw][starts][group])
    level = (capacity[s] - d_before) / np.maximum(w_from, 1e-300)
    pos = np.arange(n)
    first = np.minimum.reduceat(np.where(r > level, pos, n), starts)[group]
    level_star = np.where(first < n, level[np.minimum(first, n - 1)], np.inf)
    alloc = np.where(pos < first, d, level_star * w)
    out = np.empty(n)
    out[order] = alloc
    return out


def feature(b: Burst) -> str:
    """The interference-prone trait of a culprit burst (Beacon Appendix B)."""
    if b.n1:
        return "n1"
    if b.kind == "meta":
        return "high_md"
    if b.request_size < SMALL_REQUEST:
        return "high_iops"
    return "high_bw"


@dataclass
class Contribution:
    """One culprit's cost to one victim through one component."""

    victim: str
    culprit: str
    component: str
    feature: str
    start: int
    end: int
    delay_s: float
    seconds: int
    share: float  # mean share of the component while it held the victim back


@dataclass
class Diagnosis:
    pairs: list[Contribution]  # kept pairs, one row per component
    io_seconds: dict[str, float]  # victim -> seconds in I/O bursts
    delays: dict[tuple[str, str], float]  # (victim, culprit) -> total delay, all pairs
    bursts: dict[str, list[Burst]]
    calibration: Calibration
    episodes: list[dict[str, Any]]


@dataclass
class _Loads:
    """Per burst: what it asks, its forwarder allocations and demands, its OST loads."""

    ask: np.ndarray
    asked: np.ndarray  # after an overloaded MDS scaled it (metadata bursts)
    alloc: dict[str, np.ndarray] = field(default_factory=dict)
    demand: dict[str, np.ndarray] = field(default_factory=dict)
    ost: dict[str, np.ndarray] = field(default_factory=dict)
    md: np.ndarray | None = None


def _n1_jobs(store: Store, span: Span) -> set[str]:
    return set(
        store.query("SELECT job_id FROM job_summaries WHERE io_mode = 'N-1'")
        .column("job_id")
        .to_pylist()
    )


#: Bursts of some jobs cut elsewhere: (jobs covered, their bursts by job). The distributed
#: analysis (`iolens.analyze.distributed`) cuts each job's bursts in parallel, next to its
#: report; `diagnose` then cuts only the jobs not covered. `n1` is set here.
PRECUT_BURSTS: ContextVar[tuple[set[str], dict[str, list[Burst]]] | None] = ContextVar(
    "iolens_precut_bursts", default=None
)


def _bursts(store: Store, span: Span, n1_jobs: set[str]) -> dict[str, list[Burst]]:
    rows = usage_rows(store, span)
    pre = PRECUT_BURSTS.get()
    if pre is None:
        return bursts(rows, burst_windows(store, span), n1_jobs)
    covered, cut = pre
    ids = pa.array(sorted(covered), pa.string())
    rest = rows.filter(pc.invert(pc.is_in(rows.column("job_id"), value_set=ids)))
    out = bursts(rest, burst_windows(store, span), n1_jobs) if rest.num_rows else {}
    for job, found in cut.items():
        for b in found:
            b.n1 = job in n1_jobs and b.kind != "meta"
        out[job] = found
    return dict(sorted(out.items()))  # job order, as cut from the rows above


def diagnose(
    store: Store,
    span: Span = EVERYTHING,
    n1_jobs: set[str] | None = None,
) -> Diagnosis:
    """Culprits of every job with I/O in `span` (all data by default)."""
    caps = capacities(store)
    n1_jobs = _n1_jobs(store, span) if n1_jobs is None else n1_jobs
    by_job = _bursts(store, span, n1_jobs)
    found = sorted((b for bs in by_job.values() for b in bs), key=lambda b: b.start)
    if not found:
        return Diagnosis([], {}, {}, by_job, Calibration(), [])
    t0 = found[0].start
    n = max(b.end for b in found) - t0 + 1
    u = utilisation(store, t0, n)
    cal = calibrate(found, u, caps)
    for b in found:
        b.reshape(rate_of(b, cal))
    mds = _mds(u)
    rho_mds = u.of(mds) if mds else np.zeros(n)
    mds_factor = np.minimum(1.0, 1.0 / np.maximum(rho_mds, 1e-9))

    # What every burst asks of every component.
    loads: list[_Loads] = []
    entries: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
    md_forwarder: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    ost_total: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    md_pre, md_post = np.zeros(n), np.zeros(n)
    for i, b in enumerate(found):
        sl = slice(b.start - t0, b.end - t0)
        ask = ask_of(b, cal)
        asked = ask * mds_factor[sl] if b.kind == "meta" else ask
        ld = _Loads(ask, asked)
        for f, (nb, no) in b.fwd_work.items():
            if f not in caps or no <= 0:
                continue
            unit = caps[f].cost(nb, no) / no * (cal.n1_fwd if b.n1 else 1.0)
            entries[f].append((i, asked * unit * no / b.units, b.procs.get(f, 1) * unit))
            if b.kind == "meta":
                md_forwarder[f][sl] += asked * b.md_ops / b.units * no / b.units
        for o, (nb, no) in b.ost_work.items():
            if o not in caps:
                continue
            pen = cal.n1_ost.get(b.kind, 1.0) if b.n1 else 1.0
            ld.ost[o] = ask * caps[o].cost(nb, no) / b.units * pen
            ost_total[o][sl] += ld.ost[o]
        if b.kind == "meta":
            ld.md = asked * b.md_ops / b.units
            md_pre[sl] += ask * b.md_ops / b.units
            md_post[sl] += ld.md
        loads.append(ld)
    mds_cap = store.query(
        "SELECT max(peak_ops) AS c FROM components WHERE kind IN ('mds', 'mdt')"
    ).to_pylist()[0]["c"]
    # The MDS's other load (login-node storms) = offered load not explained by the jobs.
    md_total = md_post + np.maximum(0.0, rho_mds * (mds_cap or 0.0) - md_pre)

    # Forwarder thread time: water-fill each forwarder's data capacity (what metadata,
    # served first, leaves) by outstanding requests x service time.
    fwd_total: dict[str, np.ndarray] = {}
    for f, ents in entries.items():
        sec = np.concatenate([np.arange(found[i].start, found[i].end) - t0 for i, _, _ in ents])
        dem = np.concatenate([d for _, d, _ in ents])
        wgt = np.concatenate([np.full(len(d), w) for _, d, w in ents])
        cap = u.cap(f)
        data_cap = np.maximum(cap - md_forwarder[f] * cal.md_per_op.get(f, 0.0), 0.05 * cap)
        alloc = water_fill(sec, dem, wgt, data_cap)
        fwd_total[f] = np.bincount(sec, alloc, n)
        k = 0
        for i, d, _ in ents:
            loads[i].alloc[f] = alloc[k : k + len(d)]
            loads[i].demand[f] = d
            k += len(d)

    starts = [b.start for b in found]
    contrib: dict[tuple[str, str, str], list[Any]] = {}
    io_seconds: dict[str, float] = defaultdict(float)
    for vi, v in enumerate(found):
        io_seconds[v.job_id] += v.duration
        lv = loads[vi]
        sl = slice(v.start - t0, v.end - t0)
        lost = 1.0 - np.minimum(1.0, v.done / np.maximum(lv.ask, 1e-9))
        lost = np.where(lost >= MIN_SLOWDOWN, lost, 0.0)
        if not lost.any():
            continue
        # The limiting component each second: smallest granted fraction wins, ties to
        # the forwarder (requests queue there first).
        fwds = list(lv.alloc)
        f_ratio = (
            np.stack([np.minimum(1, lv.alloc[f] / np.maximum(lv.demand[f], 1e-300)) for f in fwds])
            if fwds
            else np.ones((1, v.duration))
        )
        f_fwd = f_ratio.min(0)
        osts = list(lv.ost)
        if osts:
            o_rho = np.stack([u.of(o)[sl] for o in osts])
            f_ost, o_idx = 1.0 / np.maximum(1.0, o_rho.max(0)), o_rho.argmax(0)
        else:
            f_ost, o_idx = np.ones(v.duration), np.zeros(v.duration, int)
        f_mds = mds_factor[sl] if v.kind == "meta" else np.ones(v.duration)
        at_ost = f_ost < f_fwd
        at_mds = (f_mds < np.minimum(f_fwd, f_ost)) & ~at_ost
        at_fwd = ~at_ost & ~at_mds
        f_idx = f_ratio.argmin(0)
        hi = bisect_left(starts, v.end)
        for ci in range(hi):
            c = found[ci]
            if c.job_id == v.job_id or c.end <= v.start:
                continue
            lc = loads[ci]
            lo_t, hi_t = max(v.start, c.start), min(v.end, c.end)
            iv = slice(lo_t - v.start, hi_t - v.start)
            ic = slice(lo_t - c.start, hi_t - c.start)
            it = slice(lo_t - t0, hi_t - t0)
            parts: list[tuple[str, np.ndarray]] = []
            for k, f in enumerate(fwds):
                if f in lc.alloc:
                    mask = at_fwd[iv] & (f_idx[iv] == k)
                    share = lc.alloc[f][ic] / np.maximum(fwd_total[f][it], 1e-12)
                    parts.append((f, np.where(mask, share, 0.0)))
            for k, o in enumerate(osts):
                if o in lc.ost:
                    mask = at_ost[iv] & (o_idx[iv] == k)
                    share = lc.ost[o][ic] / np.maximum(ost_total[o][it], 1e-12)
                    parts.append((o, np.where(mask, share, 0.0)))
            if mds and v.kind == "meta" and lc.md is not None:
                share = lc.md[ic] / np.maximum(md_total[it], 1e-12)
                parts.append((mds, np.where(at_mds[iv], share, 0.0)))
            for comp, share in parts:
                delay = lost[iv] * share
                total = float(delay.sum())
                if total <= 0:
                    continue
                key = (v.job_id, c.job_id, comp)
                hit = np.nonzero(delay > 0)[0]
                entry = contrib.setdefault(key, [0.0, 2**62, -(2**62), 0, 0.0, defaultdict(float)])
                entry[0] += total
                entry[1] = min(entry[1], lo_t + int(hit[0]))
                entry[2] = max(entry[2], lo_t + int(hit[-1]) + 1)
                entry[3] += len(hit)
                entry[4] += float(share[hit].sum())
                entry[5][feature(c)] += total

    delays: dict[tuple[str, str], float] = defaultdict(float)
    for (victim, culprit, _comp), e in contrib.items():
        delays[(victim, culprit)] += e[0]
    kept = {k for k, d in delays.items() if d >= max(MIN_DELAY_S, MIN_SHARE * io_seconds[k[0]])}
    pairs = [
        Contribution(
            victim,
            culprit,
            comp,
            max(e[5], key=e[5].get),
            e[1],
            e[2],
            e[0],
            e[3],
            e[4] / max(1, e[3]),
        )
        for (victim, culprit, comp), e in contrib.items()
        if (victim, culprit) in kept and e[0] >= MINOR_COMPONENT * delays[(victim, culprit)]
    ]
    diag = Diagnosis(pairs, dict(io_seconds), dict(delays), by_job, cal, [])
    diag.episodes = n1_episodes(store, diag)
    return diag


def n1_episodes(store: Store, diag: Diagnosis) -> list[dict[str, Any]]:
    """`n1_interference` anomalies: a large N-1 job flooding a forwarder's thread pool.

    One episode per (culprit, forwarder) with kept victims through that forwarder, when the
    culprit spans at least `N1_EPISODE_NODE_SHARE` of the forwarder's compute nodes. The
    window is the culprit's N-1 bursts that overlapped its victims.
    """
    rows = [p for p in diag.pairs if p.feature == "n1"]
    if not rows:
        return []
    culprits = sorted({p.culprit for p in rows})
    behind = {
        r["forwarder"]: r["n"]
        for r in store.query(
            "SELECT forwarder, count(*) AS n FROM forwarding GROUP BY forwarder"
        ).to_pylist()
    }
    store.register("_iolens_culprits", pa.table({"job_id": culprits}))
    try:
        spans = store.query(
            "SELECT j.job_id, f.forwarder, count(*) AS n FROM jobs j "
            "JOIN _iolens_culprits USING (job_id), unnest(j.nodes) AS t(node) "
            "JOIN forwarding f ON f.compute_node = t.node GROUP BY ALL"
        ).to_pylist()
    finally:
        store.unregister("_iolens_culprits")
    nodes = {(r["job_id"], r["forwarder"]): r["n"] for r in spans}
    groups: dict[tuple[str, str], list[Contribution]] = defaultdict(list)
    for p in rows:
        if p.component in behind:
            groups[(p.culprit, p.component)].append(p)
    episodes = []
    for (culprit, fwd), ps in sorted(groups.items()):
        if nodes.get((culprit, fwd), 0) < N1_EPISODE_NODE_SHARE * behind[fwd]:
            continue
        lo, hi = min(p.start for p in ps), max(p.end for p in ps)
        n1b = [b for b in diag.bursts.get(culprit, []) if b.n1 and b.end > lo and b.start < hi]
        start = min([b.start for b in n1b] or [lo])
        end = max([b.end for b in n1b] or [hi])
        victims = {}
        for p in ps:
            victims[p.victim] = victims.get(p.victim, 0.0) + p.delay_s
        lost_share = max(d / max(diag.io_seconds.get(v, 1.0), 1.0) for v, d in victims.items())
        episodes.append(
            {
                "kind": "n1_interference",
                "component_kind": "forwarder",
                "component_id": fwd,
                "start": start,
                "end": end,
                "severity": "critical" if lost_share >= 0.5 else "warning",
                "evidence": {
                    "summary": (
                        f"N-1 job {culprit} ({nodes.get((culprit, fwd), 0)} of "
                        f"{behind[fwd]} nodes) held {fwd}'s threads; {len(victims)} job(s) "
                        f"lost {sum(victims.values()):.0f} s of I/O"
                    ),
                    "culprit": culprit,
                    "victims": {v: round(d, 1) for v, d in sorted(victims.items())},
                    "culprit_nodes_behind_forwarder": nodes.get((culprit, fwd), 0),
                    "forwarder_nodes": behind[fwd],
                    "n1_thread_cost": round(diag.calibration.n1_fwd, 2),
                },
            }
        )
    return episodes


def _ts(second: float) -> datetime:
    return datetime.fromtimestamp(second, UTC).replace(tzinfo=None)


def interference_table(diag: Diagnosis) -> pa.Table:
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = []
    for p in diag.pairs:
        io = diag.io_seconds.get(p.victim, 0.0)
        total = diag.delays[(p.victim, p.culprit)]
        rows.append(
            {
                "victim": p.victim,
                "culprit": p.culprit,
                "component_id": p.component,
                "feature": p.feature,
                "start": _ts(p.start),
                "end": _ts(p.end),
                "delay_s": round(p.delay_s, 2),
                "score": round(total / io, 4) if io else None,
                "evidence": json.dumps(
                    {
                        "victim_io_s": round(io, 1),
                        "pair_delay_s": round(total, 1),
                        "seconds_held_back": p.seconds,
                        "culprit_share": round(p.share, 3),
                    },
                    sort_keys=True,
                ),
                "created": now,
            }
        )
    return pa.Table.from_pylist(rows, schema=INTERFERENCE)


def anomalies_table(diag: Diagnosis) -> pa.Table:
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        {
            **e,
            "start": _ts(e["start"]),
            "end": _ts(e["end"]),
            "evidence": json.dumps(e["evidence"], sort_keys=True),
            "detector": DETECTOR,
            "created": now,
        }
        for e in diag.episodes
    ]
    return pa.Table.from_pylist(rows, schema=ANOMALIES)


def store_diagnosis(store: Store, diag: Diagnosis, victims: list[str], span: Span) -> None:
    """Replace the analysed victims' pairs and this detector's episodes in `span`."""
    store.register("_iolens_victims", pa.table({"job_id": pa.array(victims, pa.string())}))
    try:
        with store.transaction():
            store.execute(
                "DELETE FROM interference WHERE victim IN (SELECT job_id FROM _iolens_victims)"
            )
            where, params = span.sql('"start"')
            store.execute(f"DELETE FROM anomalies WHERE detector = ?{where}", [DETECTOR, *params])
            wanted = set(victims)
            table = interference_table(diag)
            mask = pa.array([v in wanted for v in table.column("victim").to_pylist()], pa.bool_())
            store.append("interference", table.filter(mask))
            store.append("anomalies", anomalies_table(diag))
    finally:
        store.unregister("_iolens_victims")


def culprits(store: Store, victim: str) -> list[dict[str, Any]]:
    """Stored culprits of one job, surest first (one entry per culprit and component)."""
    rows = store.query(
        'SELECT culprit, component_id, feature, delay_s, "start", "end", score, evidence '
        "FROM interference WHERE victim = ? "
        "ORDER BY score DESC NULLS LAST, culprit, delay_s DESC, component_id",
        [victim],
    ).to_pylist()
    return [
        {
            "job_id": r["culprit"],
            "component": r["component_id"],
            "feature": r["feature"],
            "delay_s": r["delay_s"],
            "start": r["start"].isoformat() + "Z" if r["start"] else None,
            "end": r["end"].isoformat() + "Z" if r["end"] else None,
            "score": r["score"],
            "evidence": json.loads(r["evidence"]) if r["evidence"] else {},
        }
        for r in rows
    ]
