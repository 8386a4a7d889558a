"""Cost of a trace batch's job row on a store that knows many jobs (`ingest.load`).

A process's trace only adds its job when nobody reported it (`Batch.keep_known_jobs`), so
every trace batch asks whether its job is known. Baseline in the same process: reading
every stored job id into Python, as the loader did before.

    python bench/known_jobs.py [--jobs 100000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from iolens.ingest.load import _without_known
from iolens.model.schema import JOBS
from iolens.store import DuckDBStore


def scan_every_id(store: DuckDBStore, jobs: pa.Table) -> pa.Table:
    known = set(store.query("SELECT job_id FROM jobs").column("job_id").to_pylist())
    keep = [j not in known for j in jobs.column("job_id").to_pylist()]
    return jobs.filter(pa.array(keep, pa.bool_()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "k.duckdb") as store:
        store.append(
            "jobs",
            pa.Table.from_pylist(
                [{"job_id": str(i), "user": "u"} for i in range(args.jobs)], schema=JOBS
            ),
        )
        batch = pa.Table.from_pylist([{"job_id": "5", "user": "x"}], schema=JOBS)
        rows = []
        for name, f in (("scan every id (before)", scan_every_id), ("join (now)", _without_known)):
            ts = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                assert f(store, batch).num_rows == 0
                ts.append(time.perf_counter() - t)
            rows.append([name, f"{1000 * statistics.median(ts):.2f}"])
    print(f"{args.jobs:,} known jobs, one trace batch's job row, median of {args.repeat}\n")
    print(table(["method", "ms per batch"], rows))


if __name__ == "__main__":
    main()
