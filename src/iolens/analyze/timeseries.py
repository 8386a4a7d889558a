"""Rates over time from merged records, exactly.

A merged client record says "`bytes` moved between t_start and t_end"; spreading them
uniformly over that span and integrating per bin gives per-second series whose sum is the
record total to the byte (bins get fractional parts of a record). It runs in O(records +
bins) with two cumulative sums instead of expanding records to seconds.
"""

from __future__ import annotations

import numpy as np


def spread(
    t0: np.ndarray, t1: np.ndarray, amount: np.ndarray, origin: float, width: float, nbins: int
) -> np.ndarray:
    """Sum of `amount` per bin, each spread uniformly over [t0, t1) (seconds).

    Zero-length records land wholly in the bin holding t0. Values outside the bins are
    clipped into the first/last bin so nothing is lost.
    """
    out = np.zeros(nbins + 2)
    if len(t0) == 0:
        return out[:nbins]
    a = np.clip((np.asarray(t0, float) - origin) / width, 0, nbins)
    b = np.clip((np.asarray(t1, float) - origin) / width, 0, nbins)
    amount = np.asarray(amount, float)
    point = b - a < 1e-12
    # Point records.
    idx = np.minimum(np.floor(a[point]).astype(np.int64), nbins - 1)
    np.add.at(out, idx, amount[point])
    # Spans: integral F(x) = rate * (clip(x, a, b) - a). Evaluate F at bin edges via the
    # piecewise-linear ramp, built from slope changes and offsets at ceil(a), ceil(b).
    a, b, amount = a[~point], b[~point], amount[~point]
    rate = amount / (b - a)
    edges = np.zeros(nbins + 2)  # F at integer edges k = 0..nbins, as second differences
    slope = np.zeros(nbins + 2)
    ca, cb = np.ceil(a).astype(np.int64), np.ceil(b).astype(np.int64)
    np.add.at(slope, ca, rate)
    np.add.at(slope, cb, -rate)
    np.add.at(edges, ca, rate * (ca - a))
    np.add.at(edges, cb, -rate * (cb - b))
    F = np.cumsum(np.cumsum(slope) - slope) + np.cumsum(edges)
    # F[k] for k in 0..nbins: value of the integral at edge k.
    F = F[: nbins + 1]
    out[:nbins] += np.diff(F)
    return out[:nbins]
