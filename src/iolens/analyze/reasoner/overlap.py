"""Grouping anomalies that overlap in time (within a slack), shared by node and system."""

from __future__ import annotations

import datetime as dt
import itertools
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


def crowded(
    span: tuple[dt.datetime, dt.datetime],
    key: object,
    others: Sequence[tuple[object, dt.datetime, dt.datetime]],
    need: int,
) -> float:
    """Share of `span` (its owner `key`) during which at least `need` distinct keys,
    the owner included, were anomalous (`others`: (key, start, end)). Grouping by a
    chain of overlaps lets one long anomaly bridge brief, unrelated ones; this asks
    whether each member itself spent most of its time in company."""
    s, e = span
    cuts = sorted({s, e} | {t for _, a, b in others for t in (a, b) if s < t < e})
    if len(cuts) == 1:  # an instant: is it in company?
        keys = {key} | {k for k, a, b in others if a <= s <= b}
        return 1.0 if len(keys) >= need else 0.0
    inside = dt.timedelta(0)
    for lo, hi in itertools.pairwise(cuts):
        mid = lo + (hi - lo) / 2
        keys = {key} | {k for k, a, b in others if a <= mid <= b}
        if len(keys) >= need:
            inside += hi - lo
    return inside / (e - s)
