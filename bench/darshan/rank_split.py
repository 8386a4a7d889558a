"""Splitting shared Darshan records over the ranks Darshan names (issue 21).

    PYTHONPATH=src .venv/bin/python bench/darshan/rank_split.py [--records 10000] [--repeat 3]

A job with many shared files (one read and one write row each, 500 ops per row, 1,024
ranks of which ~100 moved the rest): `RankPlan.apply` (vectorised) against the same
records through `split_record` one by one (the reference the tests compare it with),
in this process. Prints the median seconds and the ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import median, table, timed  # noqa: E402

from iolens.ingest.importers.darshan_ranks import RankPlan, split_record  # noqa: E402


def case(n: int) -> tuple[RankPlan, dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(0)
    parts = np.stack(
        [rng.integers(10**6, 10**7, n), rng.integers(0, 10**4, n), rng.integers(10**8, 10**9, n)],
        1,
    )
    plan = RankPlan(
        nprocs=1024,
        slow=np.zeros(n, np.int64),
        fast=np.ones(n, np.int64),
        part_bytes=parts,
        tfrac=np.tile([0.2, 0.1, 0.7], (n, 1)),
        rest=np.full(n, 100),
        known=np.ones(n, bool),
    )
    total = parts.sum(1)
    rec = np.r_[np.arange(n), np.arange(n)]
    reads = total // 3
    it = {
        "op": np.r_[np.full(n, "read", object), np.full(n, "write", object)],
        "count": np.full(2 * n, 500),
        "bytes": np.r_[reads, total - reads],
        "t0": np.zeros(2 * n),
        "t1": np.ones(2 * n),
        "dur": np.ones(2 * n),
        "rank": np.full(2 * n, -1),
        "id": rec.astype(np.uint64),
    }
    return plan, it, rec


def one_by_one(plan: RankPlan, it: dict[str, np.ndarray], rec: np.ndarray) -> None:
    order = np.argsort(rec, kind="stable")
    for rows in np.split(order, np.flatnonzero(np.diff(rec[order])) + 1):
        split_record(
            it["count"][rows].tolist(),
            it["bytes"][rows].tolist(),
            plan.part_bytes[rec[rows[0]]].tolist(),
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    plan, it, rec = case(a.records)
    fast = median(timed(lambda: plan.split(it["count"], it["bytes"], rec), a.repeat))
    whole = median(timed(lambda: plan.apply(it, rec, 262_144), a.repeat))
    slow = median(timed(lambda: one_by_one(plan, it, rec), a.repeat))
    print(
        table(
            ["step", f"{a.records:,} shared records, s (median of {a.repeat})"],
            [
                ["split, vectorised (`RankPlan.split`)", f"{fast:.3f}"],
                ["split, record by record (`split_record`)", f"{slow:.3f}"],
                ["ratio", f"{slow / fast:.0f}x"],
                ["split + rows per rank (`RankPlan.apply`)", f"{whole:.3f}"],
            ],
        )
    )


if __name__ == "__main__":
    main()
