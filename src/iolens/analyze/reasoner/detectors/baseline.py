"""A robust rolling baseline: median and MAD of the last `window` normal samples of a key.

Median/MAD rather than mean/stddev so one slow call cannot drag the baseline along;
anomalous samples are not learned, so a long slow phase stays anomalous to its end.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Hashable

#: MAD to standard deviation for normal data.
MAD_SIGMA = 1.4826


class Baseline:
    def __init__(self, window: int, min_samples: int) -> None:
        self.window = window
        self.min_samples = min_samples
        self._seen: dict[Hashable, deque[float]] = {}

    def stats(self, key: Hashable) -> tuple[float, float] | None:
        """(median, MAD scaled to sigma) of the key's baseline; None while too short."""
        xs = self._seen.get(key)
        if xs is None or len(xs) < self.min_samples:
            return None
        med = statistics.median(xs)
        mad = statistics.median(abs(x - med) for x in xs) * MAD_SIGMA
        return med, mad

    def learn(self, key: Hashable, x: float) -> None:
        self._seen.setdefault(key, deque(maxlen=self.window)).append(x)
