"""Analysis time for one simulated day (issue 5 goal: 1,024 nodes x 24 h in < 60 s, 2 cores).

Simulates and ingests once per size, then times `analyze_all` (per-job reports, findings,
phases, history, interference, component detectors) on a copy of the database, `--repeat`
times, and prints medians per stage. Several sizes show how it scales with nodes.

    python bench/analyze_day.py [--sizes 512,1024,2048] [--hours 24] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median, table
from iolens.analyze.components import analyze_components
from iolens.analyze.pipeline import analyze_jobs
from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,1024,2048")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in [int(s) for s in args.sizes.split(",")]:
            base = Path(tmp) / f"{nodes}.duckdb"
            sim = simulate(SimConfig(nodes=nodes, hours=args.hours, seed=args.seed))
            with DuckDBStore(base) as store:
                sim.load(store)
                counts = store.query(
                    "SELECT (SELECT count(*) FROM jobs) AS jobs, "
                    "(SELECT count(*) FROM client_io) AS client, "
                    "(SELECT count(*) FROM server_samples) AS samples"
                ).to_pylist()[0]
            jobs_s, comp_s = [], []
            for i in range(args.repeat):
                work = Path(tmp) / f"{nodes}-{i}.duckdb"
                shutil.copy(base, work)
                with DuckDBStore(work) as store:
                    t0 = time.perf_counter()
                    analyze_jobs(store)
                    t1 = time.perf_counter()
                    analyze_components(store)
                    t2 = time.perf_counter()
                jobs_s.append(t1 - t0)
                comp_s.append(t2 - t1)
                work.unlink()
            total = [a + b for a, b in zip(jobs_s, comp_s, strict=True)]
            rows.append(
                [
                    f"{nodes:,}",
                    f"{counts['jobs']:,}",
                    f"{counts['client']:,}",
                    f"{counts['samples']:,}",
                    f"{median(jobs_s):.1f}",
                    f"{median(comp_s):.1f}",
                    f"**{median(total):.1f}**",
                ]
            )
            print(f"{nodes} nodes done", file=sys.stderr)
    print(f"one simulated day = {args.hours} h, seed {args.seed}, median of {args.repeat}\n")
    print(
        table(
            [
                "nodes",
                "jobs",
                "client records",
                "server samples",
                "jobs s",
                "components s",
                "total s",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
