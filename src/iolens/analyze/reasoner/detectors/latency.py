"""Per-call latency of each (op, size class) against the process's own recent calls.

Anomalous: slower than the baseline median by `k` robust sigmas *and* by a factor of
`ratio` (the factor guards the MAD of a very steady process, which can be ~0). Defaults
are generic outlier bounds, not tuned to any planted fault.
"""

from __future__ import annotations

from typing import Any

from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.detectors.baseline import Baseline


class Latency:
    name = "latency"

    def __init__(
        self, window: int = 256, min_samples: int = 16, k: float = 6.0, ratio: float = 3.0
    ) -> None:
        self.base = Baseline(window, min_samples)
        self.k = k
        self.ratio = ratio

    def observe(self, a: Activity) -> dict[str, Any] | None:
        key = (a.op, a.size_class)
        x = a.per_call_ns
        st = self.base.stats(key)
        if st is not None:
            med, sigma = st
            if x > med + self.k * sigma and x > self.ratio * med:
                return {
                    "detector": self.name,
                    "op": a.op,
                    "size_class": a.size_class,
                    "per_call_us": x / 1e3,
                    "baseline_us": med / 1e3,
                    "slowdown": x / med if med > 0 else None,
                }
        self.base.learn(key, x)
        return None
