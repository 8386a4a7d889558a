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
from collections import defaultdict
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.jobs.calibration import (
    Calibration,
    ask_of,
    cost_samples,
    cut,
    fit,
    proc_rate,
    rate_of,
    rate_samples,
)
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
from iolens.analyze.jobs.utilisation import (
    Utilisation,
    component_limits,
    metadata_server,
    utilisation,
)
from iolens.model.schema import ANOMALIES, INTERFERENCE
from iolens.store.base import Store

MIN_DELAY_S = 10.0  # a culprit must cost the victim at least this much I/O time ...
MIN_SHARE = 0.25  # ... and at least this share of the victim's I/O time
MIN_SLOWDOWN = 0.05  # seconds slowed by less than this are noise
MINOR_COMPONENT = 0.05  # a kept pair's components carrying less of its delay are not listed
# An N-1 job is a forwarder-wide anomaly (`n1_interference`) when it spans at least this
# share of the compute nodes behind the forwarder: it then floods the thread pool
# (Beacon: "particularly when N is large").
N1_EPISODE_NODE_SHARE = 0.5
SMALL_REQUEST = 64 * 1024  # below this a burst is IOPS-bound ("high_iops")
DETECTOR = "interference"


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
    d_before, w_from = _within_seconds(d, w, starts, group)
    level = (capacity[s] - d_before) / np.maximum(w_from, 1e-300)
    pos = np.arange(n)
    first = np.minimum.reduceat(np.where(r > level, pos, n), starts)[group]
    level_star = np.where(first < n, level[np.minimum(first, n - 1)], np.inf)
    alloc = np.where(pos < first, d, level_star * w)
    out = np.empty(n)
    out[order] = alloc
    return out


def _within_seconds(
    d: np.ndarray, w: np.ndarray, starts: np.ndarray, group: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per entry: the demand of the entries before it in its second, and the weight of it
    and those after it. Summed rank by rank within each second (not as a running sum over
    all seconds), so the figures of a second do not depend on the other seconds passed in
    with it: a window gives the same allocations as the whole span."""
    n = len(d)
    sizes = np.diff(np.r_[starts, n])
    d_before, w_before = np.empty(n), np.empty(n)
    acc_d, acc_w = np.zeros(len(starts)), np.zeros(len(starts))
    for k in range(int(sizes.max())):
        live = sizes > k
        i = starts[live] + k
        d_before[i], w_before[i] = acc_d[live], acc_w[live]
        acc_d[live] += d[i]
        acc_w[live] += w[i]
    return d_before, acc_w[group] - w_before


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
    """Per burst, over a window: what it asks, its forwarder allocations and demands, its
    OST loads."""

    ask: np.ndarray
    asked: np.ndarray  # after an overloaded MDS scaled it (metadata bursts)
    alloc: dict[str, np.ndarray] = field(default_factory=dict)
    demand: dict[str, np.ndarray] = field(default_factory=dict)
    ost: dict[str, np.ndarray] = field(default_factory=dict)
    md: np.ndarray | None = None


@dataclass
class Tally:
    """What one culprit cost one victim through one component, summed over seconds."""

    delay: float = 0.0
    start: int = 2**62
    end: int = -(2**62)
    seconds: int = 0
    share: float = 0.0  # summed over the seconds held back
    features: dict[str, float] = field(default_factory=dict)  # delay by culprit trait

    def merge(self, other: Tally) -> None:
        self.delay += other.delay
        self.start = min(self.start, other.start)
        self.end = max(self.end, other.end)
        self.seconds += other.seconds
        self.share += other.share
        for k, v in other.features.items():
            self.features[k] = self.features.get(k, 0.0) + v


Tallies = dict[tuple[str, str, str], Tally]  # (victim, culprit, component) -> tally


@dataclass
class TimeWindow:
    """The seconds [lo, hi) and the bursts overlapping them, in diagnosis order."""

    lo: int
    hi: int
    bursts: list[Burst]


def diagnosis_order(bursts: Iterable[Burst]) -> list[Burst]:
    """Start order, ties by job and burst: the same order however the bursts arrive."""
    return sorted(bursts, key=lambda b: (b.start, b.job_id, b.index))


def window_edges(t0: int, t1: int, width: int) -> list[tuple[int, int]]:
    """[t0, t1) cut at multiples of `width` seconds."""
    cuts = list(range((t0 // width + 1) * width, t1, width))
    return list(zip([t0, *cuts], [*cuts, t1], strict=True))


def overlapping(bursts: Iterable[Burst], lo: int, hi: int) -> list[Burst]:
    return [b for b in bursts if b.start < hi and b.end > lo]


#: The calibration and tallies of a span computed elsewhere, window by window (the
#: distributed analysis, `iolens.analyze.distributed`); `diagnose` then only assembles.
PRECOMPUTED: ContextVar[tuple[Calibration, Tallies] | None] = ContextVar(
    "iolens_precomputed_windows", default=None
)


def merge_tallies(parts: Iterable[Tallies]) -> Tallies:
    out: Tallies = {}
    for part in parts:
        for key, t in part.items():
            if key in out:
                out[key].merge(t)
            else:
                out[key] = t
    return out


def window_tallies(
    found: list[Burst],
    u: Utilisation,
    cal: Calibration,
    caps: dict[str, Capacity],
    mds: str | None,
    mds_cap: float | None,
) -> Tallies:
    """Every victim's slowdown in the window's seconds, split between the culprits.

    `found` are the bursts overlapping the window, in diagnosis order, reshaped with the
    calibration. Every quantity is per second, so a span's tallies are the merged tallies
    of its windows.
    """
    t0, n = u.t0, u.n
    rho_mds = u.of(mds) if mds else np.zeros(n)
    mds_factor = np.minimum(1.0, 1.0 / np.maximum(rho_mds, 1e-9))

    # What every burst asks of every component.
    loads: list[_Loads] = []
    entries: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
    md_forwarder: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    ost_total: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    md_pre, md_post = np.zeros(n), np.zeros(n)
    spans = []
    for i, b in enumerate(found):
        bs, ws = cut(b, u)
        spans.append((bs, ws))
        ask = ask_of(b, cal)[bs]
        asked = ask * mds_factor[ws] if b.kind == "meta" else ask
        ld = _Loads(ask, asked)
        for f, (nb, no) in b.fwd_work.items():
            if f not in caps or no <= 0:
                continue
            unit = caps[f].cost(nb, no) / no * (cal.n1_fwd if b.n1 else 1.0)
            entries[f].append((i, asked * unit * no / b.units, b.procs.get(f, 1) * unit))
            if b.kind == "meta":
                md_forwarder[f][ws] += asked * b.md_ops / b.units * no / b.units
        for o, (nb, no) in b.ost_work.items():
            if o not in caps:
                continue
            pen = cal.n1_ost.get(b.kind, 1.0) if b.n1 else 1.0
            ld.ost[o] = ask * caps[o].cost(nb, no) / b.units * pen
            ost_total[o][ws] += ld.ost[o]
        if b.kind == "meta":
            ld.md = asked * b.md_ops / b.units
            md_pre[ws] += ask * b.md_ops / b.units
            md_post[ws] += ld.md
        loads.append(ld)
    # The MDS's other load (login-node storms) = offered load not explained by the jobs.
    md_total = md_post + np.maximum(0.0, rho_mds * (mds_cap or 0.0) - md_pre)

    # Forwarder thread time: water-fill each forwarder's data capacity (what metadata,
    # served first, leaves) by outstanding requests x service time.
    fwd_total: dict[str, np.ndarray] = {}
    for f, ents in entries.items():
        sec = np.concatenate([np.arange(spans[i][1].start, spans[i][1].stop) for i, _, _ in ents])
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

    out: Tallies = {}
    for vi, v in enumerate(found):
        lv = loads[vi]
        vs, ws = spans[vi]
        v0, v1 = ws.start + t0, ws.stop + t0  # the victim's seconds in this window
        dur = v1 - v0
        lost = 1.0 - np.minimum(1.0, v.done[vs] / np.maximum(lv.ask, 1e-9))
        lost = np.where(lost >= MIN_SLOWDOWN, lost, 0.0)
        if not lost.any():
            continue
        # The limiting component each second: smallest granted fraction wins, ties to
        # the forwarder (requests queue there first).
        fwds = list(lv.alloc)
        f_ratio = (
            np.stack([np.minimum(1, lv.alloc[f] / np.maximum(lv.demand[f], 1e-300)) for f in fwds])
            if fwds
            else np.ones((1, dur))
        )
        f_fwd = f_ratio.min(0)
        osts = list(lv.ost)
        if osts:
            o_rho = np.stack([u.of(o)[ws] for o in osts])
            f_ost, o_idx = 1.0 / np.maximum(1.0, o_rho.max(0)), o_rho.argmax(0)
        else:
            f_ost, o_idx = np.ones(dur), np.zeros(dur, int)
        f_mds = mds_factor[ws] if v.kind == "meta" else np.ones(dur)
        at_ost = f_ost < f_fwd
        at_mds = (f_mds < np.minimum(f_fwd, f_ost)) & ~at_ost
        at_fwd = ~at_ost & ~at_mds
        f_idx = f_ratio.argmin(0)
        # Only the components that held the victim back in a second it lost can carry a
        # culprit's delay: the culprit loop looks at those alone (most of a wide job's
        # forwarders and OSTs never limit it).
        live = lost > 0
        fwd_held = [(fwds[k], at_fwd & (f_idx == k)) for k in np.unique(f_idx[at_fwd & live])]
        ost_held = [(osts[k], at_ost & (o_idx == k)) for k in np.unique(o_idx[at_ost & live])]
        mds_held = mds is not None and v.kind == "meta" and bool((at_mds & live).any())
        if not (fwd_held or ost_held or mds_held):
            continue
        for ci, c in enumerate(found):
            if c.start >= v1:
                break  # diagnosis order: no later burst overlaps
            c0, c1 = spans[ci][1].start + t0, spans[ci][1].stop + t0
            if c.job_id == v.job_id or c1 <= v0:
                continue
            lc = loads[ci]
            lo_t, hi_t = max(v0, c0), min(v1, c1)
            iv = slice(lo_t - v0, hi_t - v0)
            ic = slice(lo_t - c0, hi_t - c0)
            it = slice(lo_t - t0, hi_t - t0)
            parts: list[tuple[str, np.ndarray]] = []
            for f, held in fwd_held:
                if f in lc.alloc:
                    share = lc.alloc[f][ic] / np.maximum(fwd_total[f][it], 1e-12)
                    parts.append((f, np.where(held[iv], share, 0.0)))
            for o, held in ost_held:
                if o in lc.ost:
                    share = lc.ost[o][ic] / np.maximum(ost_total[o][it], 1e-12)
                    parts.append((o, np.where(held[iv], share, 0.0)))
            if mds and mds_held and lc.md is not None:
                share = lc.md[ic] / np.maximum(md_total[it], 1e-12)
                parts.append((mds, np.where(at_mds[iv], share, 0.0)))
            for comp, share in parts:
                delay = lost[iv] * share
                total = float(delay.sum())
                if total <= 0:
                    continue
                hit = np.nonzero(delay > 0)[0]
                t = out.setdefault((v.job_id, c.job_id, comp), Tally())
                t.merge(
                    Tally(
                        total,
                        lo_t + int(hit[0]),
                        lo_t + int(hit[-1]) + 1,
                        len(hit),
                        float(share[hit].sum()),
                        {feature(c): total},
                    )
                )
    return out


def n1_jobs(store: Store, modes: dict[str, str | None] | None = None) -> set[str]:
    """The N-1 jobs: as analysed before, overridden by the modes of the jobs analysed now."""
    stored = set(
        store.query("SELECT job_id FROM job_summaries WHERE io_mode = 'N-1'")
        .column("job_id")
        .to_pylist()
    )
    modes = modes or {}
    return (stored - set(modes)) | {j for j, m in modes.items() if m == "N-1"}


#: Every job's bursts, cut elsewhere: the distributed analysis (`iolens.analyze.distributed`)
#: cuts each job's next to its report, in parallel, for a diagnosis over all data. Every
#: job with client records has a job row (trace batches carry one), so no job with bursts
#: is missing from them. `n1` is set here.
PRECUT_BURSTS: ContextVar[dict[str, list[Burst]] | None] = ContextVar(
    "iolens_precut_bursts", default=None
)


def _bursts(store: Store, span: Span, n1: set[str]) -> dict[str, list[Burst]]:
    precut = PRECUT_BURSTS.get()
    if precut is None:
        return bursts(usage_rows(store, span), burst_windows(store, span), n1)
    for job, found in precut.items():
        mark_n1(found, job in n1)
    return dict(sorted(precut.items()))  # job order, as cut from the rows


def mark_n1(found: list[Burst], n1: bool) -> None:
    for b in found:
        b.n1 = n1 and b.kind != "meta"


def metadata_capacity(store: Store) -> float | None:
    return store.query(
        "SELECT max(peak_ops) AS c FROM components WHERE kind IN ('mds', 'mdt')"
    ).to_pylist()[0]["c"]


def tally_span(
    store: Store, found: list[Burst], caps: dict[str, Capacity]
) -> tuple[Calibration, Tallies]:
    """The calibration and tallies over the bursts' span as one window."""
    lo, hi = found[0].start, max(b.end for b in found)
    limits = component_limits(store, lo, hi)
    u = utilisation(store, lo, hi, limits)
    proc_bw = proc_rate([rate_samples(found, u)])
    cal = fit(proc_bw, [cost_samples(found, u, caps, proc_bw)], caps)
    for b in found:
        b.reshape(rate_of(b, cal))
    tallies = window_tallies(found, u, cal, caps, metadata_server(limits), metadata_capacity(store))
    return cal, tallies


def diagnose(
    store: Store,
    span: Span = EVERYTHING,
    n1: set[str] | None = None,
) -> Diagnosis:
    """Culprits of every job with I/O in `span` (all data by default)."""
    caps = capacities(store)
    by_job = _bursts(store, span, n1_jobs(store) if n1 is None else n1)
    found = diagnosis_order(b for bs in by_job.values() for b in bs)
    if not found:
        return Diagnosis([], {}, {}, by_job, Calibration(), [])
    pre = PRECOMPUTED.get()
    if pre is None:
        cal, tallies = tally_span(store, found, caps)
    else:
        cal, tallies = pre
        for b in found:
            b.reshape(rate_of(b, cal))
    io_seconds: dict[str, float] = defaultdict(float)
    for b in found:
        io_seconds[b.job_id] += b.duration
    delays: dict[tuple[str, str], float] = defaultdict(float)
    for (victim, culprit, _comp), t in tallies.items():
        delays[(victim, culprit)] += t.delay
    kept = {k for k, d in delays.items() if d >= max(MIN_DELAY_S, MIN_SHARE * io_seconds[k[0]])}
    pairs = [
        Contribution(
            victim,
            culprit,
            comp,
            max(t.features, key=t.features.__getitem__),
            t.start,
            t.end,
            t.delay,
            t.seconds,
            t.share / max(1, t.seconds),
        )
        for (victim, culprit, comp), t in tallies.items()
        if (victim, culprit) in kept and t.delay >= MINOR_COMPONENT * delays[(victim, culprit)]
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
