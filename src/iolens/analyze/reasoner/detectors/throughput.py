"""Bytes per second of data activities (read/write) of a size class against the
process's own recent ones: the lower tail, by `k` robust sigmas and a factor `ratio`.
The statistics are kept on its inverse, seconds per byte, whose slow tail is the upper
one (throughput's median minus k sigmas is often below zero, catching nothing).

Latency covers it for fixed sizes; throughput also sees a run of calls whose sizes
vary within a class. Off unless a site config enables it.
"""

from __future__ import annotations

from typing import Any

from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.detectors.baseline import Baseline

DATA_OPS = frozenset({"read", "write"})


class Throughput:
    name = "throughput"

    def __init__(
        self, window: int = 256, min_samples: int = 16, k: float = 6.0, ratio: float = 3.0
    ) -> None:
        self.base = Baseline(window, min_samples)
        self.k = k
        self.ratio = ratio

    def observe(self, a: Activity) -> dict[str, Any] | None:
        if a.op not in DATA_OPS or a.size <= 0 or a.dur_ns <= 0:
            return None
        key = (a.op, a.size_class)
        x = (a.dur_ns / 1e9) / (a.size * a.count)  # seconds per byte
        st = self.base.stats(key)
        if st is not None:
            med, sigma = st
            if x > med + self.k * sigma and x > self.ratio * med:
                return {
                    "detector": self.name,
                    "op": a.op,
                    "size_class": a.size_class,
                    "mib_s": 1 / x / 2**20,
                    "baseline_mib_s": 1 / med / 2**20 if med > 0 else None,
                    "slowdown": x / med if med > 0 else None,
                }
        self.base.learn(key, x)
        return None
