"""Per-group figures of small frames with numpy, as pandas' groupby computes them.

A pandas groupby costs a fraction of a millisecond a call whatever the size of the frame,
and a diagnosis of a log of a few hundred records made hundreds of them (the rules' time
on a DXT log was mostly that). These helpers take the rows as arrays, sorted by group,
and give the same numbers as the groupby they replace:

- group sums of floats use `np.add.reduceat` over the rows in group order, which is what
  pandas 3 does itself for group codes in sorted order without NaN
  (`BaseGrouper._reduceat_aggregate`); with a NaN, pandas' Cython kernel skips it and
  sums the rest with Kahan's compensation, in row order, and so does `sums` (a Python
  loop: DXT times and Darshan counters are never NaN);
- integer sums are exact whatever the order; maxima and minima skip NaN (`np.fmax`,
  `np.fmin`), as pandas' do.

Every helper takes `starts`, the index of each group's first row in the sorted rows
(`starts_of`), so several figures of the same groups share one sort.
"""

from __future__ import annotations

import numpy as np


def starts_of(*keys: np.ndarray) -> np.ndarray:
    """Index of the first row of each run of equal `keys` (rows sorted by them)."""
    n = len(keys[0])
    if not n:
        return np.zeros(0, np.intp)
    new = np.zeros(n, bool)
    new[0] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(new)


def by_first_seen(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The groups of equal `keys` numbered in order of first appearance (a groupby with
    `sort=False`): (each row's group, the rows stably sorted by group, each group's first
    position in that order)."""
    if not len(keys):
        empty = np.zeros(0, np.intp)
        return empty, empty, empty
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    number = np.empty(len(first), np.intp)
    number[np.argsort(first, kind="stable")] = np.arange(len(first))
    code = number[inverse.ravel()]
    order = np.argsort(code, kind="stable")
    return code, order, starts_of(code[order])


def codes_of(starts: np.ndarray, n: int) -> np.ndarray:
    """The group number (0, 1, ...) of each of `n` sorted rows with group `starts`."""
    mark = np.zeros(n, np.intp)
    mark[starts[1:]] = 1
    return np.cumsum(mark)


def sums(values: np.ndarray, starts: np.ndarray, compensated: bool = False) -> np.ndarray:
    """Sum of each group's `values`, NaN skipped (0 when all are). Floats: with Kahan's
    compensation when `compensated` (what pandas does for rows that were not in group
    order: pass the rows stably sorted by group) or when a value is NaN."""
    if not len(starts):
        return np.zeros(0, values.dtype)
    if values.dtype.kind == "f" and (compensated or np.isnan(values).any()):
        return _compensated(values, starts)
    return np.add.reduceat(values, starts)


def _compensated(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Kahan's sum of each group's non-NaN `values`, in order: pandas' `group_sum`."""
    out = np.zeros(len(starts))
    ends = np.r_[starts[1:], len(values)]
    for g, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        total = comp = 0.0
        for x in values[a:b].tolist():
            if x != x:
                continue
            y = x - comp
            t = total + y
            comp = t - total - y
            if comp != comp:  # an infinite value
                comp = 0.0
            total = t
        out[g] = total
    return out


def maxima(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Largest of each group's `values`, NaN skipped (NaN when all are)."""
    if not len(starts):
        return np.zeros(0, values.dtype)
    return np.fmax.reduceat(values, starts)


def minima(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Smallest of each group's `values`, NaN skipped (NaN when all are)."""
    if not len(starts):
        return np.zeros(0, values.dtype)
    return np.fmin.reduceat(values, starts)


def distinct(values: np.ndarray, code: np.ndarray, ngroups: int) -> np.ndarray:
    """How many distinct `values` each group has (`nunique`), for rows of group `code`
    in any order."""
    if not len(code):
        return np.zeros(ngroups, np.int64)
    order = np.lexsort((values, code))
    c, v = code[order], values[order]
    first = np.ones(len(c), bool)
    first[1:] = (c[1:] != c[:-1]) | (v[1:] != v[:-1])
    return np.bincount(c[first], minlength=ngroups).astype(np.int64)


def running_max(values: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Each row's maximum of its group's `values` so far (groupby `cummax`), for rows
    sorted by group `code`: a NaN row gives NaN and is left out of the later maxima."""
    n = len(values)
    if not n:
        return np.zeros(0, float)
    nan = np.isnan(values)
    v = np.where(nan, -np.inf, values)
    # the running maximum of (group, rank of the value) is exact, where adding a group
    # offset to float values would round
    order = np.argsort(v, kind="stable")
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    key = code.astype(np.int64) * n + rank
    top = np.maximum.accumulate(key) - code.astype(np.int64) * n
    out = v[order[top]]
    out[nan] = np.nan
    return out


def union_seconds(code: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Seconds covered by the union of each group's intervals [start, end) (overlapping
    ones counted once; an end before its start counts as the start), for rows sorted by
    group `code` then start; one figure per group, in code order."""
    n = len(start)
    if not n:
        return np.zeros(0, float)
    e = np.maximum(end, start)
    reach = running_max(e, code)
    # a block opens at each group's first interval and wherever one starts after every
    # earlier interval of the group has ended
    new = np.ones(n, bool)
    new[1:] = (code[1:] != code[:-1]) | (start[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, n - 1]
    length = reach[last] - start[first]
    return sums(length, starts_of(code[first]))
