"""Shared Darshan records split over the ranks the counters name (`darshan_ranks`): the
vectorised split agrees with the one-record reference on random records, and both keep
every row's ops and bytes and every part's bytes exact."""

from __future__ import annotations

import numpy as np
import pytest

from iolens.ingest.importers.darshan_ranks import RankPlan, split_record


def _plan(parts: np.ndarray) -> RankPlan:
    n = len(parts)
    return RankPlan(
        nprocs=64,
        slow=np.zeros(n, np.int64),
        fast=np.ones(n, np.int64),
        part_bytes=parts,
        tfrac=np.tile([0.5, 0.1, 0.4], (n, 1)),
        rest=np.full(n, 8),
        known=np.ones(n, bool),
    )


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_split_is_the_reference_split(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    parts = rng.integers(0, 10**9, (n, 3)) * (rng.random((n, 3)) < 0.8)
    parts[rng.random(n) < 0.05] = 0  # records with no part bytes at all
    two = rng.random(n) < 0.6  # a read row and a write row, else one row
    rec = np.r_[np.arange(n), np.flatnonzero(two)]
    total = parts.sum(1)
    first = np.where(two, (total * rng.random(n)).astype(np.int64), total)
    nbytes = np.r_[first, (total - first)[two]]
    cnt = np.r_[rng.integers(0, 6, n), rng.integers(0, 6, int(two.sum()))]
    c3, b3 = _plan(parts).split(cnt, nbytes, rec)
    assert (c3.sum(1) == cnt).all() and (b3.sum(1) == nbytes).all()
    assert (b3 >= 0).all() and (c3 >= 0).all()
    for r in range(n):
        rows = np.flatnonzero(rec == r)
        c, b = split_record(cnt[rows].tolist(), nbytes[rows].tolist(), parts[r].tolist())
        assert c3[rows].tolist() == c and b3[rows].tolist() == b, r
        if total[r] and cnt[rows].min() >= 3:  # enough ops everywhere: parts exact
            assert b3[rows].sum(0).tolist() == parts[r].tolist(), r
        ok = cnt[rows] >= (b3[rows] > 0).sum(1)
        assert ((c3[rows][ok] > 0) >= (b3[rows][ok] > 0)).all(), r  # no bytes without ops


def test_too_few_ops_move_bytes_between_rows_and_keep_the_parts() -> None:
    """One read op for three parts with read bytes: the largest part takes the read, and
    gives the other parts the same bytes back from its writes."""
    c, b = split_record([1, 100], [600, 9400], [5000, 2000, 3000])
    assert [sum(x) for x in c] == [1, 100] and [sum(x) for x in b] == [600, 9400]
    assert [b[0][p] + b[1][p] for p in range(3)] == [5000, 2000, 3000]
    assert sum(v > 0 for v in b[0]) == 1 and c[0] == [1, 0, 0]
