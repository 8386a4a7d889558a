"""How many ranks moved the bytes of a shared Darshan record.

A shared record (rank -1) sums all ranks. Darshan keeps, besides the sum, the slowest and
the fastest rank with their bytes, and the population variance of the bytes over the
job's ranks (`*_F_VARIANCE_RANK_BYTES`, Darshan's `darshan_variance_reduce`). With the
two named ranks taken out, the variance says how concentrated the rest is: if `m` of
the other ranks moved the rest `R` in equal parts, their sum of squares is `R**2 / m`,
and the variance gives that sum, so `m = R**2 / (n * (V + mean**2) - Bs**2 - Bf**2)`.

An even split over all ranks made rank 0, the one aggregator of a collective write,
"move" 1/n of the file, and made a job's write-op count read as the number of processes
sharing a file.
"""

from __future__ import annotations

import numpy as np


def rest_ranks(
    total: np.ndarray,
    nprocs: int,
    slowest_bytes: np.ndarray,
    fastest_bytes: np.ndarray,
    variance: np.ndarray,
) -> np.ndarray:
    """Per record: how many ranks other than the slowest and fastest moved the rest.

    0 when nothing is left; `nprocs - 2` (the even split) when the variance is missing or
    contradicts the named ranks' bytes (older logs: 0 or -1).
    """
    n = max(int(nprocs), 2)
    total = total.astype(np.float64)
    rest = total - slowest_bytes - fastest_bytes
    mean = total / n
    squares = n * (variance + mean * mean) - slowest_bytes**2.0 - fastest_bytes**2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(squares > 0, rest * rest / squares, np.nan)
    sane = np.isfinite(m) & (variance > 0) | (variance == 0) & (slowest_bytes == fastest_bytes)
    m = np.where(sane & np.isfinite(m), np.rint(m), n - 2)
    return np.where(rest > 0, np.clip(m, 1, n - 2), 0).astype(np.int64)
