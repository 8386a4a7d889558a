"""Grouping anomalies that overlap in time (within a slack), shared by node and system."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TypeVar

from iolens.analyze.reasoner.activity import Activity

T = TypeVar("T")


def clusters(
    items: Sequence[T], span: Callable[[T], tuple[dt.datetime, dt.datetime]], slack: dt.timedelta
) -> list[list[T]]:
    """Items grouped so that each group's spans chain together `slack` apart at most."""
    out: list[list[T]] = []
    end: dt.datetime | None = None
    for it in sorted(items, key=lambda x: span(x)[0]):
        s, e = span(it)
        if out and end is not None and s <= end + slack:
            out[-1].append(it)
            end = max(end, e)
        else:
            out.append([it])
            end = e
    return out


def active(
    acts: Sequence[Activity],
    start: dt.datetime,
    end: dt.datetime,
    key: Callable[[Activity], object],
) -> set[object]:
    """Keys (processes, nodes) with an activity overlapping [start, end]."""
    return {key(a) for a in acts if a.t_start <= end and a.t_end >= start}
