"""How loaded each shared component was, second by second, from its own totals.

Agents report, per forwarder, OST and metadata server, the active threads and the queue
length (which grows by the thread count per unit of overload) and the service time (which
rises as the component degrades). Turning one window of those samples into load needs two
figures of the whole analysed span: the thread count (the most threads ever active) and the
best service time. They come first (`component_limits`, one aggregate per window, merged),
so a window's load can then be computed from that window's samples alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from iolens.store.base import Store

#: Samples are read up to this far past a window's end: a sample is stamped at the end of
#: its interval and counted from the start, so a long one ending just after the window
#: still belongs to it (1 s samples and the 60 s downsampled ones are covered).
LOOKAHEAD_S = 120

_TOTALS = (
    "FROM server_samples WHERE job_id IS NULL AND kind IN ('forwarder', 'ost', 'mds', 'mdt') "
    "AND epoch(ts) > ? AND epoch(ts) <= ? "
    "AND floor(epoch(ts) - interval_s) >= ? AND floor(epoch(ts) - interval_s) < ?"
)


def _params(lo: int, hi: int) -> list[int]:
    return [lo, hi + LOOKAHEAD_S, lo, hi]


@dataclass(frozen=True)
class Limits:
    """A component's kind, thread count and best service time (us) over the span."""

    kind: str
    threads: float
    best_us: float | None


def component_limits(store: Store, lo: int, hi: int) -> dict[str, Limits]:
    """Limits seen in the samples counted in [lo, hi)."""
    rows = store.query(
        "SELECT component_id, min(kind) AS kind, max(coalesce(active_threads, 0)) AS a, "
        "min(service_us) FILTER (WHERE isfinite(service_us) AND service_us > 0) AS s "
        f"{_TOTALS} GROUP BY component_id",
        _params(lo, hi),
    ).to_pylist()
    return {r["component_id"]: Limits(r["kind"], max(1.0, float(r["a"])), r["s"]) for r in rows}


def merge_limits(parts: Iterable[dict[str, Limits]]) -> dict[str, Limits]:
    """The limits of a span from those of its windows (in component order)."""
    out: dict[str, Limits] = {}
    for part in parts:
        for c, lim in part.items():
            old = out.get(c)
            if old is not None:
                best = [x for x in (old.best_us, lim.best_us) if x is not None]
                lim = Limits(old.kind, max(old.threads, lim.threads), min(best) if best else None)
            out[c] = lim
    return dict(sorted(out.items()))


def metadata_server(limits: dict[str, Limits]) -> str | None:
    """The metadata server whose load gates metadata bursts (the first, by name)."""
    return next((c for c, lim in sorted(limits.items()) if lim.kind in ("mds", "mdt")), None)


@dataclass
class Utilisation:
    """Per component, per second from `t0`: offered load / capacity, and the capacity factor."""

    t0: int
    n: int
    rho: dict[str, np.ndarray]
    capacity: dict[str, np.ndarray]
    kind: dict[str, str]

    def of(self, component: str) -> np.ndarray:
        return self.rho.get(component, np.zeros(self.n))

    def cap(self, component: str) -> np.ndarray:
        return self.capacity.get(component, np.ones(self.n))


def utilisation(store: Store, lo: int, hi: int, limits: dict[str, Limits]) -> Utilisation:
    """Offered load over [lo, hi) from the component totals.

    Load = active/threads below saturation and 1 + queue/threads above it; capacity = best
    service time / current service time (a degraded component serves slower).
    """
    n = hi - lo
    rows = store.query(
        "SELECT component_id, CAST(floor(epoch(ts) - interval_s) AS BIGINT) AS sec, "
        "coalesce(queue_len, 0) AS q, coalesce(active_threads, 0) AS a, service_us AS s "
        f"{_TOTALS} ORDER BY component_id, sec",
        _params(lo, hi),
    )
    comp = rows.column("component_id").to_numpy(zero_copy_only=False)
    sec = rows.column("sec").to_numpy()
    q = rows.column("q").to_numpy()
    a = rows.column("a").to_numpy()
    s = rows.column("s").to_numpy(zero_copy_only=False).astype(float)
    out = Utilisation(lo, n, {}, {}, {c: lim.kind for c, lim in limits.items()})
    if len(comp) == 0:
        return out
    cut = np.nonzero(comp[1:] != comp[:-1])[0] + 1
    for i, j in zip(np.r_[0, cut], np.r_[cut, len(comp)], strict=True):
        name = str(comp[i])
        lim = limits.get(name)
        if lim is None:  # not seen when the limits were taken (a late sample)
            continue
        threads = lim.threads
        rho = np.where(a[i:j] < threads * (1 - 1e-9), a[i:j] / threads, 1 + q[i:j] / threads)
        svc = np.where(np.isfinite(s[i:j]) & (s[i:j] > 0), s[i:j], np.nan)
        best = lim.best_us if lim.best_us is not None else 1.0
        idx = sec[i:j] - lo
        out.rho[name] = np.zeros(n)
        out.rho[name][idx] = rho
        out.capacity[name] = np.ones(n)
        out.capacity[name][idx] = np.nan_to_num(best / svc, nan=1.0)
    return out
