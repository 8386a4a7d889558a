"""Costs the server samples reveal only indirectly, fitted on saturated or idle seconds.

* per-process bandwidth: data bursts progressing below their remaining work in seconds
  when nothing they use is saturated are limited by their processes; the top of that
  distribution is what one process drives;
* forwarder cost of a metadata op: the load of idle-ish forwarders not explained by data;
* N-1 inflation: on forwarders (OSTs) saturated mostly by N-1 demand, the offered load
  not explained by the other jobs' demand, per unit of N-1 demand at nominal cost.

Every fit is a percentile or median of per-second samples, and every sample depends only
on its own second, so windows of time give their samples separately (`rate_samples`, then
`cost_samples` once the rate is known) and `fit` pools them: the result does not depend
on how the span was cut.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from iolens.analyze.jobs.usage import Burst, Capacity
from iolens.analyze.jobs.utilisation import Utilisation

SATURATED = 0.95  # utilisation above which a component is taken as the limit
# Fallbacks when the samples cannot fit them: N-1 requests hold a forwarder thread ~6x
# longer (they wait on a shared file at the backend) and cost an OST 3x (writes) or 1.5x
# (reads) in extent-lock traffic; a metadata op costs a forwarder 1/2.5 of a data request.
DEFAULT_N1_FWD = 6.0
DEFAULT_N1_OST = {"write": 3.0, "read": 1.5}
DEFAULT_MD_PER_OP = 0.4
MIN_RATE_SAMPLES = 10  # unthrottled seconds needed to trust a per-process peak rate


@dataclass
class Calibration:
    """What the fits found (or the fallbacks)."""

    n1_fwd: float = DEFAULT_N1_FWD
    n1_ost: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_N1_OST))
    md_per_op: dict[str, float] = field(default_factory=dict)  # forwarder s per metadata op
    proc_bw: float | None = None  # bytes/s one process drives when nothing limits it


@dataclass
class CostSamples:
    """One window's samples of the N-1 and metadata costs."""

    fwd: list[np.ndarray] = field(default_factory=list)
    md: list[np.ndarray] = field(default_factory=list)
    ost: dict[str, list[np.ndarray]] = field(default_factory=lambda: {"read": [], "write": []})


def rate_of(b: Burst, cal: Calibration) -> float:
    """Units/s the burst's processes could drive if nothing else limited them."""
    if b.kind != "meta" and cal.proc_bw and b.request_size > 0:
        return cal.proc_bw * b.nprocs / b.request_size
    return float("inf")


def ask_of(b: Burst, cal: Calibration) -> np.ndarray:
    """Units the burst asks for each second: its remaining work, capped by what its
    processes can drive."""
    return np.minimum(b.remaining, rate_of(b, cal))


def cut(b: Burst, u: Utilisation) -> tuple[slice, slice]:
    """The seconds a burst shares with a window: (slice of the burst, slice of the window)."""
    lo, hi = max(b.start, u.t0), min(b.end, u.t0 + u.n)
    return slice(lo - b.start, hi - b.start), slice(lo - u.t0, hi - u.t0)


def _free(b: Burst, u: Utilisation, ws: slice) -> np.ndarray:
    """Seconds in which nothing the burst used was saturated."""
    ok = np.ones(ws.stop - ws.start, bool)
    for c in (*b.fwd_work, *b.ost_work):
        ok &= u.of(c)[ws] < SATURATED
    return ok


def rate_samples(found: list[Burst], u: Utilisation) -> np.ndarray:
    """Per-process bandwidth in the window's seconds when its processes were the limit."""
    out = []
    for b in found:
        if b.kind == "meta":
            continue
        bs, ws = cut(b, u)
        done = b.done[bs]
        ok = _free(b, u, ws) & (done < 0.9 * b.remaining[bs])
        out.append(done[ok] * b.request_size / b.nprocs)
    return np.concatenate(out) if out else np.zeros(0)


def cost_samples(
    found: list[Burst], u: Utilisation, caps: dict[str, Capacity], proc_bw: float | None
) -> CostSamples:
    """The window's samples of a metadata op's forwarder cost and of the N-1 inflation."""
    cal = Calibration(proc_bw=proc_bw)
    n = u.n
    plain: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    n1: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    used: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))  # non-N-1, served
    md: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    for b in found:
        bs, ws = cut(b, u)
        ask = ask_of(b, cal)[bs]
        done = b.done[bs]
        for f, (nb, no) in b.fwd_work.items():
            if f not in caps or no <= 0:
                continue
            unit = caps[f].cost(nb, no) / b.units
            (n1 if b.n1 else plain)[f][ws] += ask * unit
            if not b.n1:
                used[f][ws] += done * unit
            if b.kind == "meta":
                md[f][ws] += done * b.md_ops / b.units * (no / b.units)
        for o, (nb, no) in b.ost_work.items():
            if o in caps and b.n1:
                n1[f"{o}:{b.kind}"][ws] += ask * caps[o].cost(nb, no) / b.units
            elif o in caps:
                plain[o][ws] += ask * caps[o].cost(nb, no) / b.units
    out = CostSamples()
    for c, rho in u.rho.items():
        cap = u.cap(c)
        total = rho * cap
        if u.kind.get(c) == "forwarder":
            idle = (rho > 0.05) & (rho < 0.9) & (cap > 0.99) & (md[c] > 100) & (n1[c] == 0)
            out.md.append((total[idle] - used[c][idle]) / md[c][idle])
            sat = (rho > 1.2) & (rho < 250) & (cap > 0.99) & (md[c] == 0)
            sat &= n1[c] > 0.3 * (n1[c] + plain[c])
            out.fwd.append((total[sat] - plain[c][sat]) / n1[c][sat])
        elif u.kind.get(c) == "ost":
            for kind in ("read", "write"):
                other = n1.get(f"{c}:{'write' if kind == 'read' else 'read'}", np.zeros(n))
                mine = n1.get(f"{c}:{kind}", np.zeros(n))
                sat = (rho > 1.2) & (rho < 250) & (cap > 0.99) & (other == 0)
                sat &= mine > 0.5 * (mine + plain[c])
                out.ost[kind].append((total[sat] - plain[c][sat]) / mine[sat])
    return out


def _median(values: list[np.ndarray], minimum: int = 10) -> float | None:
    v = np.concatenate(values) if values else np.zeros(0)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) >= minimum else None


def proc_rate(rates: list[np.ndarray]) -> float | None:
    """What one process drives: the top of the pooled rate samples."""
    v = np.concatenate(rates) if rates else np.zeros(0)
    return float(np.percentile(v, 99)) if len(v) >= MIN_RATE_SAMPLES else None


def fit(proc_bw: float | None, costs: list[CostSamples], caps: dict[str, Capacity]) -> Calibration:
    """The calibration from every window's samples."""
    cal = Calibration(proc_bw=proc_bw)
    # An N-1 request never costs less than a plain one: a fit below 1 means the samples
    # showed no N-1 penalty (a server without extent locks), not a discount.
    cal.n1_fwd = max(1.0, _median([a for c in costs for a in c.fwd]) or DEFAULT_N1_FWD)
    for kind in ("read", "write"):
        fitted = _median([a for c in costs for a in c.ost[kind]])
        cal.n1_ost[kind] = max(1.0, fitted or DEFAULT_N1_OST[kind])
    md_cost = _median([a for c in costs for a in c.md], minimum=20)
    for f, cap in caps.items():
        if md_cost is not None and md_cost > 0:
            cal.md_per_op[f] = md_cost
        else:
            cal.md_per_op[f] = DEFAULT_MD_PER_OP / cap.ops
    return cal
