"""Simulate + ingest (+ analyse) time for a 1,024-node x 2 h cluster.

python bench/simulate_ingest.py [--nodes 1024] [--hours 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median, table
from iolens.analyze.pipeline import analyze_jobs
from iolens.ingest import load
from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore


def once(path: Path, nodes: int, hours: float, seed: int) -> dict[str, float]:
    t0 = time.perf_counter()
    sim = simulate(SimConfig(nodes=nodes, hours=hours, seed=seed))
    t1 = time.perf_counter()
    emit = ingest = 0.0
    with DuckDBStore(path) as store:
        batches = sim.batches()
        while True:
            a = time.perf_counter()
            try:
                _name, batch = next(batches)
            except StopIteration:
                break
            b = time.perf_counter()
            load(store, batch)
            emit += b - a
            ingest += time.perf_counter() - b
        t2 = time.perf_counter()
        analyze_jobs(store)
        t3 = time.perf_counter()
        records = store.query("SELECT count(*) AS n FROM client_io").to_pylist()[0]["n"]
        samples = store.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
    return {
        "engine": t1 - t0,
        "emit": emit,
        "ingest": ingest,
        "sim+ingest": t2 - t0,
        "analyse": t3 - t2,
        "jobs": len(sim.result.jobs),
        "records": records,
        "samples": samples,
        "mb": os.path.getsize(path) / 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            runs.append(once(Path(tmp) / f"r{i}.duckdb", args.nodes, args.hours, seed=1))
    med = {k: median([r[k] for r in runs]) for k in runs[0]}
    print(
        f"{args.nodes} nodes x {args.hours:g} h: {med['jobs']:.0f} jobs, "
        f"{med['records']:,.0f} client records, {med['samples']:,.0f} server samples, "
        f"{med['mb']:.0f} MB DuckDB file; median of {args.repeat} runs\n"
    )
    print(
        table(
            ["stage", "median s"],
            [[k, f"{med[k]:.2f}"] for k in ("engine", "emit", "ingest", "sim+ingest", "analyse")],
        )
    )
    rate = med["records"] / med["ingest"]
    print(f"\nIngest moved {rate / 1e6:.2f} M client records/s (with samples and files).")


if __name__ == "__main__":
    main()
