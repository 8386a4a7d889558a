"""Time of the per-job reports of every job in a store (`report.build_many`), the bulk step
`iolens analyze` starts with. For an A/B of two trees, run it with each tree's `src` on
PYTHONPATH against the same store, alternately:

    python bench/report_build.py --db STORE [--repeat 3]
    python bench/report_build.py --simulate 128 --db STORE   # make the store first (1 day)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median, timed
from iolens.analyze import report
from iolens.store import DuckDBStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--simulate", type=int, metavar="NODES", help="make the store: a 24-h day")
    args = ap.parse_args()
    if args.simulate:
        from iolens.simulate import SimConfig, simulate

        with DuckDBStore(args.db) as store:
            simulate(SimConfig(nodes=args.simulate, hours=24, seed=1)).load(store)
    with DuckDBStore(args.db) as store:
        jobs = store.query("SELECT job_id FROM jobs ORDER BY job_id").column("job_id").to_pylist()
        secs = timed(lambda: report.build_many(store, jobs), args.repeat)
    print(
        f"{len(jobs)} jobs: reports in {median(secs):.2f} s (median of {args.repeat}: "
        + ", ".join(f"{s:.2f}" for s in secs)
        + ")"
    )


if __name__ == "__main__":
    main()
