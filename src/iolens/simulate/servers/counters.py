"""Cumulative counters as Lustre keeps them: samples, min, max, sum, sum of squares.

A server's counters only grow, from the moment its targets were set up (`start_time`)
until a restart or `lctl set_param ... stats=clear` sets them back to nothing. Lustre
prints a counter only once it has samples; `Stat.samples == 0` is that "not printed yet".
"""

from __future__ import annotations

import numpy as np

U64 = 1 << 64


def whole(x: float) -> int:
    """The nearest integer (halves to even), also for numpy scalars."""
    return round(float(x))


class Stat:
    """One avg-min-max-stddev counter (`read_bytes`, `write`, `req_waittime`, ...)."""

    __slots__ = ("hi", "lo", "samples", "squares", "total", "unit")

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.clear()

    def clear(self) -> None:
        self.samples = 0
        self.lo = 0
        self.hi = 0
        self.total = 0
        self.squares = 0

    def add(self, samples: int, total: int, lo: int, hi: int, squares: int) -> None:
        """`samples` more events whose values sum to `total`, between `lo` and `hi`."""
        if samples <= 0:
            return
        if self.samples == 0:
            self.lo, self.hi = lo, hi
        else:
            self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        self.samples += samples
        self.total += total
        self.squares += squares

    def add_mean(self, samples: int, mean: float, spread: float) -> None:
        """`samples` events of mean `mean`, log-normally spread with sigma `spread` (the
        sample's own min, max and squares follow from it: two and 2.5 sigmas out)."""
        if samples <= 0:
            return
        total = whole(samples * mean)
        lo = int(mean * np.exp(-2.0 * spread)) if samples > 1 else whole(mean)
        hi = int(np.ceil(mean * np.exp(2.5 * spread))) if samples > 1 else whole(mean)
        squares = whole(samples * mean * mean * np.exp(spread * spread))
        self.add(samples, total, lo, max(lo, hi), squares)

    def values(self) -> tuple[int, int, int, int]:
        """min, max, sum and sumsq as printed: sumsq is a u64 and wraps, as Lustre's does."""
        return self.lo, self.hi, self.total, self.squares % U64


class Histogram:
    """A brw_stats section: read and write counts per power-of-two bucket (label value)."""

    __slots__ = ("buckets",)

    def __init__(self) -> None:
        self.buckets: dict[int, list[int]] = {}

    def clear(self) -> None:
        self.buckets = {}

    def add(self, bucket: int, write: bool, count: int) -> None:
        if count > 0:
            self.buckets.setdefault(bucket, [0, 0])[int(write)] += count


def log2_bucket(value: float) -> int:
    """Lustre's `lprocfs_oh_tally_log2` bucket: the smallest power of two >= value (>= 1)."""
    v = max(1, int(np.ceil(value)))
    return 1 << (v - 1).bit_length()


def spread_counts(total: int, median: float, sigma: float, buckets: list[int]) -> list[int]:
    """`total` events log-normally spread around `median`, counted into the log2 buckets
    `buckets` (each holding values in (b/2, b]); whole numbers that add up to `total`."""
    if total <= 0:
        return [0] * len(buckets)
    if sigma <= 0:
        out = [0] * len(buckets)
        target = log2_bucket(median)
        i = min(range(len(buckets)), key=lambda j: abs(buckets[j] - target))
        out[i] = total
        return out
    from math import erf, log, sqrt

    def cdf(x: float) -> float:
        return 0.5 * (1 + erf((log(x) - log(median)) / (sigma * sqrt(2)))) if x > 0 else 0.0

    edges = [cdf(b) for b in buckets]
    edges[-1] = 1.0
    share = np.diff([0.0, *edges])
    exact = total * share
    out = np.floor(exact).astype(np.int64)
    rest = total - int(out.sum())
    if rest:
        out[np.argsort(-(exact - out), kind="stable")[:rest]] += 1
    return [int(x) for x in out]
