"""Computed plot data, remembered: a page view re-renders HTML, not the analyses behind it.

Each entry carries a stamp, a cheap fingerprint of the data it was computed from (a job's
last analysis time and state; the store's batch count for system views): a new stamp
recomputes. A time-to-live bounds how stale a live view can get between stamps. Every
lookup is told to `query_times`, which files the request as cached or computed.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from iolens.present.web import query_times


class PlotCache:
    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, tuple[Hashable, float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(
        self, key: Hashable, stamp: Hashable, compute: Callable[[], Any], ttl: float = 300.0
    ) -> Any:
        now = time.monotonic()
        with self._lock:
            item = self._items.get(key)
            if item is not None and item[0] == stamp and now - item[1] < ttl:
                self._items.move_to_end(key)
                self.hits += 1
                query_times.note(hit=True)
                return item[2]
        query_times.note(hit=False)
        value = compute()
        with self._lock:
            self.misses += 1
            self._items[key] = (stamp, now, value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
