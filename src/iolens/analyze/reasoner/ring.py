"""The activity ring buffer (SIOX's ANetFWClient): the last N activities a level saw,
handed over with an anomaly so its report shows what happened just before."""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Iterable

from iolens.analyze.reasoner.activity import Activity


class Ring:
    """A bounded buffer of recent activities; `snapshot()` is what an anomaly forwards."""

    def __init__(self, size: int) -> None:
        self._buf: deque[Activity] = deque(maxlen=size)

    def push(self, a: Activity) -> None:
        self._buf.append(a)

    def snapshot(self) -> list[Activity]:
        return list(self._buf)


def before(
    activities: Iterable[Activity], triggers: list[dt.datetime], size: int
) -> list[list[Activity]]:
    """Per trigger time, the ring's content when it fired: the last `size` activities
    (in start order) that started before it. One pass, streaming like the live ring."""
    order = sorted(range(len(triggers)), key=lambda i: triggers[i])
    out: list[list[Activity]] = [[] for _ in triggers]
    ring = Ring(size)
    it = iter(activities)
    pending = next(it, None)
    for i in order:
        while pending is not None and pending.t_start < triggers[i]:
            ring.push(pending)
            pending = next(it, None)
        out[i] = ring.snapshot()
    return out
