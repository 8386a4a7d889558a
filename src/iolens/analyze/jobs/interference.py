"""Who slowed whom: culprit jobs for every job whose requests waited on a shared target.

Beacon (section 4.1, Table 5) found a job's I/O slowed by the neighbours that load the
same forwarding node, OST or metadata server while it runs, and most of all by N-1 jobs,
whose slow shared-file requests hold server threads. This module measures that from what
real servers report (`service.py`): per target and sample, each job's busy time (its
requests x their handling time, Lustre jobstats `[usecs]`) and each job's latency per
request (handling plus the queue wait of the target's server, `req_waittime`).

* **How much the victim lost.** A job's latency alone on a target is its handling time
  alone times its own queue (`baseline.py`: fitted from the samples in which a job had a
  target to itself, and the target's threads). Clients are closed loops (each process
  keeps a bounded number of requests in flight), so a job progresses in inverse
  proportion to its latency: in a sample, the share of its time at the target lost to
  contention is `1 - alone / observed`. A job with several rows on a target in one
  sample (a trace's processes, its reads and writes) is judged over all of them, by
  their time: 1 - (the requests' time alone) / (the time they took), so a fast
  read-back slowed tenfold weighs what it cost, not what its ratio says. Per second of
  the victim's bursts, the target with the largest share held it back (its stripes or
  files progress only as fast as the slowest); the victim lost that share of the
  second. Samples where noise makes the latency fall below the baseline count
  negatively, so noise cancels over a burst instead of adding up.
* **Who caused it.** The victim's latency alone already holds its own queue, so the
  excess is the others' doing: each other job is charged the lost time times its share
  of the others' busy time on the target in that sample (N-1 jobs, whose requests hold a
  thread longer, weigh more by themselves). What no scheduler job accounts for (clients
  outside jobs, untagged `procname.uid` processes) is kept as the victim's loss to "other
  clients". A victim loses at most the others' share of the target's busy time (what a
  server shared by processor sharing takes from a job that alone would fill it); more
  is its own queue, which its latency alone missed. The simulator's ground truth splits
  the same way. (Leaving the victim's own share out, as before 2026-12-06, counted its
  queue twice: a job at 10 ms per request alone and 40 ms beside one culprit lost 3/4 of
  each second to it, not 3/4 x the culprit's share.)
* **A degraded target** is not its neighbours' fault: while a `slow_ost` episode covers
  a target, the uncontended latency there is raised by the episode's measured slowdown.

A pair (victim, culprit) is kept when the culprit cost the victim at least `MIN_DELAY_S`
and `MIN_SHARE` of its I/O time. The baseline is per sample and the loss per second, so
windows of time give their baseline histograms (from the samples starting in them) and
tallies (of their seconds, against every sample covering them) separately, and the span's
are their sums (`window_tallies`, `merge_tallies`, `baseline.merge`): the distributed
analysis relies on it.

What it cannot see is said, not guessed: targets with no latency (no `[usecs]` counters)
and forwarders whose only counters are LNet's (no latency, no per-client work) are listed
in the diagnosis's `gaps`.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.jobs import baseline as base
from iolens.analyze.jobs import service
from iolens.analyze.jobs.baseline import Baseline
from iolens.analyze.jobs.service import META, Samples
from iolens.analyze.jobs.usage import (
    EVERYTHING,
    Burst,
    Span,
    burst_windows,
    bursts,
)
from iolens.analyze.jobs.usage import job_rows as usage_rows
from iolens.errors import StoreError
from iolens.model.schema import ANOMALIES, INTERFERENCE
from iolens.store.base import Store

MIN_DELAY_S = 10.0  # a culprit must cost the victim at least this much I/O time ...
MIN_SHARE = 0.25  # ... and at least this share of the victim's I/O time
MINOR_COMPONENT = 0.05  # a kept pair's components carrying less of its delay are not listed
#: Beacon 4.1: N-1 jobs harm the neighbours sharing their forwarding nodes "particularly
#: when N is large (e.g., over 32 compute nodes)". An N-1 culprit with more nodes than this
#: behind a forwarder, with kept victims behind the same forwarder, is an episode.
N1_MIN_NODES = 32
SMALL_REQUEST = 64 * 1024  # below this a culprit's requests make it IOPS-bound ("high_iops")
DETECTOR = "interference"
OTHER = "(other clients)"  # the victim's loss to no scheduler job


def feature_of(n1: bool, direction: int, size: float) -> str:
    """The interference-prone trait of a culprit (Beacon Appendix B)."""
    if direction == META:
        return "high_md"
    if n1:
        return "n1"
    if size < SMALL_REQUEST:
        return "high_iops"
    return "high_bw"


def feature(b: Burst) -> str:
    """The trait of a culprit burst, as `feature_of` for its requests."""
    return feature_of(b.n1, META if b.kind == "meta" else 0, b.request_size)


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
    share: float  # mean share of the component's busy time while it held the victim back


@dataclass
class Diagnosis:
    pairs: list[Contribution]  # kept pairs, one row per component
    io_seconds: dict[str, float]  # victim -> seconds in I/O bursts
    delays: dict[tuple[str, str], float]  # (victim, culprit) -> total delay, all pairs
    bursts: dict[str, list[Burst]]
    baseline: Baseline
    episodes: list[dict[str, Any]]
    other: dict[str, float] = field(default_factory=dict)  # victim -> s lost to no job
    gaps: list[dict[str, Any]] = field(default_factory=list)


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


#: The baseline and tallies of a span computed elsewhere, window by window (the
#: distributed analysis, `iolens.analyze.distributed`); `diagnose` then only assembles.
PRECOMPUTED: ContextVar[tuple[Baseline, Tallies, dict[str, float]] | None] = ContextVar(
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


Degraded = dict[str, list[tuple[float, float, float]]]  # target -> [(t0, t1, slowdown)]


def degraded_targets(store: Store) -> Degraded:
    """Stored slow-target episodes: their span and measured slowdown, per target."""
    rows = store.query(
        'SELECT component_id, epoch("start") AS s, epoch(coalesce("end", now()::TIMESTAMP)) '
        "AS e, evidence FROM anomalies WHERE kind = 'slow_ost'"
    ).to_pylist()
    out: Degraded = defaultdict(list)
    for r in rows:
        try:
            slow = float(json.loads(r["evidence"] or "{}").get("slowdown") or 1.0)
        except (ValueError, TypeError):
            slow = 1.0
        if slow > 1.0:
            out[r["component_id"]].append((r["s"], r["e"], slow))
    return dict(out)


def _expand(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner index, second) for every second of every [start, start + count)."""
    owner = np.repeat(np.arange(len(start)), count)
    offset = np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)
    return owner, np.repeat(start, count) + offset


def window_tallies(
    s: Samples,
    baseline: Baseline,
    found: list[Burst],
    n1: set[str],
    degraded: Degraded | None = None,
) -> tuple[Tallies, dict[str, float]]:
    """Every victim's lost time in the window's seconds [s.lo, s.hi), split between the
    culprits; each second is judged against every sample covering it.

    `found` are the bursts of the jobs (their seconds are the victims' I/O time). Returns
    the tallies and, per victim, the time lost to clients of no scheduler job.
    """
    out: Tallies = {}
    lost_other: dict[str, float] = defaultdict(float)
    if len(s) == 0 or not s.latency_known:
        return out, {}
    l0 = baseline.alone(s)
    if degraded:
        for comp, spans in degraded.items():
            on = s.component == comp
            for t0, t1, slow in spans:
                m = on & (s.t_end > t0) & (s.t_end - s.dt < t1)
                l0[m] *= slow
    # a job's rows of one sample (processes, reads and writes apart) are judged together:
    # the share of its time there lost is 1 - (its requests' time alone) / (their time)
    known_rows = s.known & np.isfinite(l0) & np.isfinite(s.latency)
    alone_t = np.bincount(s.holder, np.where(known_rows, s.ops * l0, 0.0))
    taken_t = np.bincount(s.holder, np.where(known_rows, s.ops * s.latency, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        slowed = np.clip(1.0 - alone_t / taken_t, -1.0, 1.0)[s.holder]
    job_busy = s.job_busy
    usable = np.isfinite(slowed) & known_rows
    order = np.argsort(s.group, kind="stable")
    starts = np.searchsorted(s.group[order], np.arange(len(s.group_busy)))
    ends = np.r_[starts[1:], len(order)]
    size = s.size
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for b in found:
        spans[b.job_id].append((b.start, b.end))
    for v in sorted(set(s.job[usable].tolist()) & set(spans)):
        mine = usable & (s.job == v)
        # one row per sample of a target the victim used: its first
        rows = np.flatnonzero(mine)[np.unique(s.holder[mine], return_index=True)[1]]
        first = np.floor(s.t_end[rows] - s.dt[rows]).astype(np.int64)
        count = np.maximum(1, np.round(s.dt[rows]).astype(np.int64))
        owner, sec = _expand(first, count)
        # the victim's I/O seconds in the window only
        active = np.zeros(len(sec), bool)
        for a, b in spans[v]:
            active |= (sec >= a) & (sec < b)
        active &= (sec >= s.lo) & (sec < s.hi)
        owner, sec = owner[active], sec[active]
        if len(sec) == 0:
            continue
        # per second, the target that held the victim back most
        pick = np.lexsort((-slowed[rows][owner], sec))
        sec_sorted = sec[pick]
        firsts = np.r_[True, sec_sorted[1:] != sec_sorted[:-1]]
        win_owner, win_sec = owner[pick][firsts], sec_sorted[firsts]
        for k in np.unique(win_owner):
            r = rows[k]
            held = win_sec[win_owner == k]
            g = s.group[r]
            members = order[starts[g] : ends[g]]
            whole = s.group_busy[g]
            others = whole - job_busy[r]
            if others <= 1e-9 * whole:
                continue  # alone on the target: nobody to blame
            # sharing a server, a job loses at most the others' share of it (all of that
            # when it alone would fill the server): more is its own queue, which the
            # threads model of its latency alone missed
            lost = min(float(slowed[r]), float(others / whole)) * len(held)
            lost_other[v] += lost * s.group_other[g] / others
            comp = str(s.component[r])
            parts: dict[str, float] = defaultdict(float)  # culprit -> share of the others
            traits: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
            for m in members:
                c = str(s.job[m])
                if c == v or not s.known[m]:
                    continue
                part = float(s.busy[m] / others)
                parts[c] += part
                traits[c][feature_of(c in n1, int(s.direction[m]), float(size[m]))] += part
            for c, part in parts.items():
                key = (v, c, comp)
                t = out.get(key)
                if t is None:
                    t = out[key] = Tally()
                t.merge(
                    Tally(
                        lost * part,
                        int(held.min()),
                        int(held.max()) + 1,
                        len(held),
                        part * len(held),
                        {f: lost * x for f, x in traits[c].items()},
                    )
                )
    return out, dict(lost_other)


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
#: cuts each job's next to its report, in parallel, for a diagnosis over all data. `n1` is
#: set here.
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


#: Samples read around the bursts' span: a burst's first and last seconds lie inside
#: samples whose intervals start before or end after it.
SAMPLE_MARGIN_S = 60


def sample_span(first_start: int, last_end: int) -> tuple[int, int]:
    """The sample intervals [lo, hi) the diagnosis of bursts over [first, last) reads."""
    return first_start - SAMPLE_MARGIN_S, last_end + SAMPLE_MARGIN_S


def tally_span(
    store: Store, lo: int, hi: int, found: list[Burst], n1: set[str]
) -> tuple[Baseline, Tallies, dict[str, float], Samples]:
    """The baseline and tallies over the samples starting in [lo, hi), as one window."""
    samples = service.load(store, lo, hi)
    fitted = base.samples(samples)
    tallies, other = window_tallies(samples, fitted, found, n1, degraded_targets(store))
    return fitted, tallies, other, samples


def gaps(store: Store, samples: Samples | None) -> list[dict[str, Any]]:
    """What the interference analysis could not see in this store, and how to provide it."""
    out = []
    if samples is not None and len(samples) and not samples.latency_known:
        out.append(
            {
                "missing": "request latency on the OSTs/MDTs (no [usecs] counters: Lustre < 2.12)",
                "remedy": "with Lustre 2.10 the latency comes only from brw_stats; upgrade "
                "to 2.12+ for jobstats latency",
            }
        )
    if samples is not None and len(samples) and not samples.waits_known:
        out.append(
            {
                "missing": "queue waits of the OSS/MDS services (ost/OSS/ost_io, mds/MDS/mdt)",
                "remedy": "run the agent's lustre_oss/lustre_mds sources on the servers",
            }
        )
    n_fwd = (
        store.query("SELECT count(DISTINCT forwarder) AS n FROM forwarding").column("n")[0].as_py()
    )
    if not n_fwd:
        out.append(
            {
                "missing": "the forwarding map (which compute nodes use which forwarder)",
                "remedy": "load it with `iolens site topology`",
            }
        )
    return out


def diagnose(
    store: Store,
    span: Span = EVERYTHING,
    n1: set[str] | None = None,
) -> Diagnosis:
    """Culprits of every job with I/O in `span` (all data by default)."""
    n1 = n1_jobs(store) if n1 is None else n1
    by_job = _bursts(store, span, n1)
    found = diagnosis_order(b for bs in by_job.values() for b in bs)
    if not found:
        return Diagnosis([], {}, {}, by_job, Baseline(), [], gaps=gaps(store, None))
    pre = PRECOMPUTED.get()
    samples: Samples | None = None
    if pre is None:
        lo, hi = sample_span(found[0].start, max(b.end for b in found))
        fitted, tallies, other, samples = tally_span(store, lo, hi, found, n1)
    else:
        fitted, tallies, other = pre
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
    diag = Diagnosis(
        pairs, dict(io_seconds), dict(delays), by_job, fitted, [], other, gaps(store, samples)
    )
    diag.episodes = n1_episodes(store, diag, n1)
    return diag


def n1_episodes(store: Store, diag: Diagnosis, n1: set[str]) -> list[dict[str, Any]]:
    """`n1_interference` anomalies by Beacon's criterion (section 4.1).

    An N-1 culprit with more than `N1_MIN_NODES` compute nodes behind a forwarder, and kept
    victims whose nodes sit behind the same forwarder: one episode per (culprit, forwarder),
    spanning the culprit's N-1 bursts that overlapped its victims' losses.
    """
    rows = [p for p in diag.pairs if p.culprit in n1]
    if not rows:
        return []
    jobs = sorted({p.culprit for p in rows} | {p.victim for p in rows})
    store.register("_iolens_n1", pa.table({"job_id": jobs}))
    try:
        spans = store.query(
            "SELECT j.job_id, f.forwarder, count(*) AS n FROM jobs j "
            "JOIN _iolens_n1 USING (job_id), unnest(j.nodes) AS t(node) "
            "JOIN forwarding f ON f.compute_node = t.node GROUP BY ALL"
        ).to_pylist()
        behind = {
            r["forwarder"]: r["n"]
            for r in store.query(
                "SELECT forwarder, count(*) AS n FROM forwarding GROUP BY forwarder"
            ).to_pylist()
        }
    finally:
        store.unregister("_iolens_n1")
    nodes: dict[str, dict[str, int]] = defaultdict(dict)
    for r in spans:
        nodes[r["job_id"]][r["forwarder"]] = r["n"]
    groups: dict[tuple[str, str], list[Contribution]] = defaultdict(list)
    for p in rows:
        for fwd, n in nodes.get(p.culprit, {}).items():
            if n > N1_MIN_NODES and fwd in nodes.get(p.victim, {}):
                groups[(p.culprit, fwd)].append(p)
    episodes = []
    for (culprit, fwd), ps in sorted(groups.items()):
        lo, hi = min(p.start for p in ps), max(p.end for p in ps)
        n1b = [b for b in diag.bursts.get(culprit, []) if b.n1 and b.end > lo and b.start < hi]
        start = min([b.start for b in n1b] or [lo])
        end = max([b.end for b in n1b] or [hi])
        victims: dict[str, float] = defaultdict(float)
        where: dict[str, float] = defaultdict(float)
        for p in ps:
            victims[p.victim] += p.delay_s
            where[p.component] += p.delay_s
        lost_share = max(d / max(diag.io_seconds.get(v, 1.0), 1.0) for v, d in victims.items())
        n = nodes[culprit][fwd]
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
                        f"N-1 job {culprit} ({n} of {behind.get(fwd, n)} nodes behind {fwd}) "
                        f"slowed {len(victims)} job(s) sharing the forwarder by "
                        f"{sum(victims.values()):.0f} s of I/O"
                    ),
                    "criterion": f"N-1 job over {N1_MIN_NODES} compute nodes behind one "
                    "forwarder, with victims behind it (Beacon 4.1)",
                    "culprit": culprit,
                    "victims": {v: round(d, 1) for v, d in sorted(victims.items())},
                    "delay_by_component": {c: round(d, 1) for c, d in sorted(where.items())},
                    "culprit_nodes_behind_forwarder": n,
                    "forwarder_nodes": behind.get(fwd),
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
    with contextlib.suppress(StoreError):  # a backend without `meta` (the dataset)
        store.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", [GAPS_KEY, json.dumps(diag.gaps)]
        )


#: Key in the store's `meta` table: what the last interference run could not see.
GAPS_KEY = "interference_gaps"


def interference_gaps(store: Store) -> list[dict[str, Any]]:
    """What the last interference analysis could not see (`Diagnosis.gaps`)."""
    try:
        rows = store.query("SELECT value FROM meta WHERE key = ?", [GAPS_KEY]).to_pylist()
    except StoreError:
        return []
    return json.loads(rows[0]["value"]) if rows else []


def culprits(store: Store, victim: str) -> list[dict[str, Any]]:
    """Stored culprits of one job, surest first (one entry per culprit and component)."""
    rows = store.query(
        'SELECT i.culprit, i.component_id, i.feature, i.delay_s, i."start", i."end", i.score, '
        "i.evidence, c.kind AS component_kind FROM interference i LEFT JOIN "
        "(SELECT component_id, any_value(kind) AS kind FROM components GROUP BY ALL) c "
        "USING (component_id) WHERE i.victim = ? "
        "ORDER BY i.score DESC NULLS LAST, i.culprit, i.delay_s DESC, i.component_id",
        [victim],
    ).to_pylist()
    return [
        {
            "job_id": r["culprit"],
            "component": r["component_id"],
            "component_kind": r["component_kind"],
            "feature": r["feature"],
            "delay_s": r["delay_s"],
            "start": r["start"].isoformat() + "Z" if r["start"] else None,
            "end": r["end"].isoformat() + "Z" if r["end"] else None,
            "score": r["score"],
            "evidence": json.loads(r["evidence"]) if r["evidence"] else {},
        }
        for r in rows
    ]
