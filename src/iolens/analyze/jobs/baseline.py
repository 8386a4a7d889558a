"""What a request costs a server when nobody else is using it, fitted from the data.

Interference shows up as latency: a job's requests wait longer for a thread and take longer
to handle while others load the same target. To say how much longer, each job needs its
latency without the others, which has two parts:

* the **handling time** of one request alone, per target kind, direction (read, write,
  metadata) and request size (powers of two): the median handling time of the samples in
  which one job had a target (nearly) to itself (`SOLO` of its busy time, all its rows
  together: a trace gives one per process); with too few of
  those, the lower quartile of all samples stands in (most samples of a busy target are
  contended, so their median would be too high);
* the target's **threads**: the most busy threads it was seen to keep (busy time per
  second, the largest over the span). A job alone with N requests in flight and T threads
  waits for its own requests when N > T, so its latency alone is the handling time x
  max(1, N / T): its own queue is not interference.

Assumptions, stated because the diagnosis rests on them: a request's handling time alone
depends on its size and direction but not on which target of a kind serves it (targets of
one kind are alike; a degraded one is the component detectors' business); latency beyond
what the job would see alone is caused by the load of the others using the target in the
same sample; and clients are closed loops (a bounded number of requests in flight each).

Handling times are kept as histograms of log10(us) with fixed bins and threads as maxima,
so windows of time give theirs separately and the span's are their sums and maxima
(`merge`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from iolens.analyze.jobs.service import Samples

SOLO = 0.8  # a job holding at least this share of a target's busy time has it to itself
MIN_SOLO = 10  # solo samples needed to trust their median
LOG_MIN, LOG_MAX, BINS = -1.0, 8.0, 450  # log10(us): 0.1 us .. 100 s in 2 % steps
_EDGES = np.linspace(LOG_MIN, LOG_MAX, BINS + 1)

Key = tuple[str, int, int]  # (target kind, direction, log2 of the request size)


def size_class(size: np.ndarray) -> np.ndarray:
    """log2 of the request size rounded (0 for metadata and empty requests)."""
    return np.where(size >= 1, np.round(np.log2(np.maximum(size, 1))), 0).astype(int)


@dataclass
class Baseline:
    """Per key, histograms of solo and of all latencies (sample counts)."""

    solo: dict[Key, np.ndarray] = field(default_factory=dict)
    every: dict[Key, np.ndarray] = field(default_factory=dict)
    threads: dict[str, float] = field(default_factory=dict)  # target -> most busy threads

    def alone(self, s: Samples) -> np.ndarray:
        """Each row's latency (us) had its job been alone on the target: the handling time
        alone, times its own queue when it keeps more requests in flight than the target
        has threads. NaN where nothing is known."""
        handling = self.uncontended(s.kind, s.direction, s.size)
        threads = np.array([self.threads.get(str(c), np.nan) for c in s.component])
        own_queue = np.where(threads > 0, s.in_flight / threads, 1.0)
        return handling * np.maximum(1.0, np.nan_to_num(own_queue, nan=1.0))

    def uncontended(self, kind: np.ndarray, direction: np.ndarray, size: np.ndarray) -> np.ndarray:
        """The handling time alone (us) for each row; NaN where nothing is known."""
        cls = size_class(size)
        out = np.full(len(kind), np.nan)
        cache: dict[Key, float] = {}
        for i, key in enumerate(zip(kind.tolist(), direction.tolist(), cls.tolist(), strict=True)):
            if key not in cache:
                cache[key] = self._value(key)
            out[i] = cache[key]
        return out

    def _value(self, key: Key) -> float:
        solo = self.solo.get(key)
        if solo is not None and solo.sum() >= MIN_SOLO:
            return _quantile(solo, 0.5)
        every = self.every.get(key)
        if every is not None and every.sum() > 0:
            return _quantile(every, 0.25)
        # the nearest size class of the same kind and direction with data
        near = [k for k in self.every if k[:2] == key[:2] and self.every[k].sum() > 0]
        if not near:
            return float("nan")
        k = min(near, key=lambda k: abs(k[2] - key[2]))
        scale = 2.0 ** ((key[2] - k[2]) / 2)  # between fixed-cost and per-byte: sqrt(size)
        return self._value(k) * scale


def samples(s: Samples) -> Baseline:
    """The histograms and thread counts of the samples a window owns (known latencies
    only): each sample counts in exactly one window's, so windows add up."""
    out = Baseline()
    ok = np.isfinite(s.handling) & (s.handling > 0) & (s.ops > 0) & s.owned
    if not ok.any():
        return out
    first = np.unique(s.group, return_index=True)[1]
    threads = s.group_threads
    mine = s.owned[first]
    for comp in np.unique(s.component[first][mine]):
        on = (s.component[first] == comp) & mine
        busiest = float(np.nanmax(threads[on])) if np.isfinite(threads[on]).any() else 0.0
        out.threads[str(comp)] = busiest
    solo = ok & (s.share >= SOLO)
    cls = size_class(s.size)
    bins = np.clip(np.digitize(np.log10(np.maximum(s.handling, 1e-3)), _EDGES) - 1, 0, BINS - 1)
    code = np.char.add(np.char.add(s.kind.astype(str), "|"), (s.direction * 1000 + cls).astype(str))
    for key_code in np.unique(code[ok]):
        m = ok & (code == key_code)
        kind, rest = str(key_code).split("|")
        key = (kind, int(rest) // 1000, int(rest) % 1000)
        out.every[key] = np.bincount(bins[m], minlength=BINS).astype(float)
        if (m & solo).any():
            out.solo[key] = np.bincount(bins[m & solo], minlength=BINS).astype(float)
    return out


def merge(parts: Iterable[Baseline]) -> Baseline:
    """The baseline of a span from those of its windows."""
    out = Baseline()
    for p in parts:
        for c, n in p.threads.items():
            out.threads[c] = max(out.threads.get(c, 0.0), n)
        for mine, theirs in ((out.solo, p.solo), (out.every, p.every)):
            for k, h in theirs.items():
                if k in mine:
                    mine[k] = mine[k] + h
                else:
                    mine[k] = h.copy()
    return out


def _quantile(hist: np.ndarray, q: float) -> float:
    cum = np.cumsum(hist)
    i = int(np.searchsorted(cum, q * cum[-1]))
    centre = (_EDGES[i] + _EDGES[i + 1]) / 2
    return float(10**centre)
