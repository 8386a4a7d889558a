"""How long the web UI's queries take, with and without the plot cache (Beacon Fig. 13).

Beacon measured 2,000 real queries and found its in-memory cache the difference between
sub-second and multi-second answers. The same measure here, on the server's own traffic:
an ASGI middleware times every GET that reaches the plot cache (`cache.PlotCache`), and
the cache tells it, through a per-request tally, whether the request was served from
remembered data only ("cached") or had to compute something ("computed"). Requests that
never touch the cache (static files, log-in) are not queries of a view and are left out.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextvars import ContextVar
from typing import Any

#: [hits, misses] of the plot cache during the current request; None outside one.
_tally: ContextVar[list[int] | None] = ContextVar("iolens_query_tally", default=None)


def note(hit: bool) -> None:
    """Called by the plot cache on every lookup: count it against the running request."""
    tally = _tally.get()
    if tally is not None:
        tally[0 if hit else 1] += 1


class QueryTimes:
    """The newest `size` query times (seconds), each marked cached or computed."""

    def __init__(self, size: int = 5000) -> None:
        self._items: deque[tuple[str, float, bool]] = deque(maxlen=size)
        self._lock = threading.Lock()

    def record(self, path: str, seconds: float, cached: bool) -> None:
        with self._lock:
            self._items.append((path, seconds, cached))

    def summary(self) -> dict[str, Any]:
        """Sorted times per class (a CDF's x values) and their percentiles."""
        with self._lock:
            items = list(self._items)
        out: dict[str, Any] = {"queries": len(items)}
        for name, want in (("cached", True), ("computed", False)):
            xs = sorted(s for _, s, c in items if c is want)
            out[name] = {
                "n": len(xs),
                "p50_s": _quantile(xs, 0.5),
                "p95_s": _quantile(xs, 0.95),
                "max_s": xs[-1] if xs else None,
                "seconds": xs,
            }
        return out


def _quantile(xs: list[float], q: float) -> float | None:
    """The smallest time at or below which a share `q` of the queries finished."""
    if not xs:
        return None
    return xs[min(len(xs) - 1, max(0, int(q * len(xs) + 0.999999) - 1))]


class TimingMiddleware:
    """Pure ASGI middleware: time GETs and file them by what the plot cache did."""

    def __init__(self, app: Any, times: QueryTimes) -> None:
        self.app = app
        self.times = times

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        tally = [0, 0]
        token = _tally.set(tally)
        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            _tally.reset(token)
            if tally[0] or tally[1]:
                self.times.record(scope["path"], time.perf_counter() - t0, tally[1] == 0)
