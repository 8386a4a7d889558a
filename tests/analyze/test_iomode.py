"""Beacon's I/O modes, table-driven."""

from __future__ import annotations

import numpy as np
import pytest

from iolens.analyze.iomode import classify

MiB = 2**20
CASES = {
    # name: (process per record, file per record, bytes per record, nprocs, expected)
    "n-n": ([0, 1, 2, 3], [10, 11, 12, 13], [MiB] * 4, 4, "N-N"),
    "n-n two files each": ([0, 0, 1, 1], [10, 20, 11, 21], [MiB] * 4, 2, "N-N"),
    "n-1": ([0, 1, 2, 3], [5, 5, 5, 5], [MiB] * 4, 4, "N-1"),
    "n-1 new shared file per checkpoint": ([0, 1, 0, 1], [5, 5, 6, 6], [MiB] * 4, 2, "N-1"),
    "n-m aggregators": ([0, 4], [10, 11], [MiB] * 2, 8, "N-M"),
    "n-m groups share files": ([0, 1, 2, 3], [10, 10, 11, 11], [MiB] * 4, 4, "N-M"),
    "1-1": ([0], [10], [MiB], 64, "1-1"),
    "1-1 several files": ([0, 0], [10, 11], [MiB, MiB], 64, "1-1"),
    "small side file ignored": ([0, 1, 2, 3, 0], [5, 5, 5, 5, 99], [MiB] * 4 + [100], 4, "N-1"),
    "no data": ([], [], [], 4, None),
    "unknown nprocs": ([0, 1], [10, 11], [MiB, MiB], None, "N-N"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_classify(case):
    procs, files, nbytes, nprocs, expected = CASES[case]
    got = classify(np.array(procs), np.array(files), np.array(nbytes, float), nprocs)
    assert got == expected
