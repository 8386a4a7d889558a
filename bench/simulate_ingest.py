"""Simulate + load time for a 1,024-node x 2 h cluster, on each collection path.

The servers' side of a simulation reaches the store through the real agent: on the
`files` path every server's Lustre files are rendered each agent round and read by the
real sources; on the `direct` path (the default) the agent's arithmetic gets the readings
those sources would take (the same store, `tests/simulate/test_paths.py`). `--baseline
DIR` also times another checkout's simulator (e.g. the pre-issue-17 one, whose emitter
wrote server rows directly) in a child process, in the same run.

python bench/simulate_ingest.py [--nodes 1024] [--hours 2] [--repeat 3]
    [--paths direct,files] [--baseline /work/main] [--analyse]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median, table
from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore

#: Run by the child for `--baseline`: the old API (`sim.batches()`, one `load` each).
BASELINE = """
import json, sys, time
from iolens.ingest.load import load
from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore
t0 = time.perf_counter()
sim = simulate(SimConfig(nodes={nodes}, hours={hours}, seed=1))
t1 = time.perf_counter()
with DuckDBStore(sys.argv[1]) as store:
    for _name, batch in sim.batches():
        load(store, batch)
    t2 = time.perf_counter()
    n = store.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
print(json.dumps({{"simulate": t1 - t0, "load": t2 - t1, "total": t2 - t0, "samples": n}}))
"""


def once(path: Path, config: SimConfig, analyse: bool) -> dict[str, float]:
    t0 = time.perf_counter()
    sim = simulate(config)
    t1 = time.perf_counter()
    with DuckDBStore(path) as store:
        sim.load(store)
        t2 = time.perf_counter()
        counts = store.query(
            "SELECT (SELECT count(*) FROM client_io) AS records, "
            "(SELECT count(*) FROM server_samples) AS samples, "
            "(SELECT count(*) FROM metrics) AS metrics, "
            "(SELECT count(*) FROM ingested WHERE key LIKE 'agent:%') AS batches"
        ).to_pylist()[0]
        t3 = time.perf_counter()
        if analyse:
            from iolens.analyze.pipeline import analyze_jobs

            analyze_jobs(store)
        t4 = time.perf_counter()
    return {
        "simulate": t1 - t0,
        "load": t2 - t1,
        "total": t2 - t0,
        "analyse": t4 - t3,
        "jobs": len(sim.result.jobs),
        **counts,
        "mb": os.path.getsize(path) / 1e6,
    }


def baseline(src: Path, tmp: Path, nodes: int, hours: float) -> dict[str, float]:
    db = tmp / f"baseline-{time.monotonic_ns()}.duckdb"
    env = {**os.environ, "PYTHONPATH": str(src / "src")}
    code = BASELINE.format(nodes=nodes, hours=hours)
    out = subprocess.run(
        [sys.executable, "-c", code, str(db)], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--paths", default="direct,files")
    ap.add_argument("--baseline", type=Path, help="another checkout to time in the same run")
    ap.add_argument("--analyse", action="store_true", help="also time analyze_jobs")
    args = ap.parse_args()
    config = SimConfig(nodes=args.nodes, hours=args.hours, seed=1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.paths.split(","):
            runs = [
                once(Path(tmp) / f"{path}{i}.duckdb", replace(config, collect=path), args.analyse)
                for i in range(args.repeat)
            ]
            med = {k: median([r[k] for r in runs]) for k in runs[0]}
            rows.append((path, med))
        if args.baseline:
            runs = [
                baseline(args.baseline, Path(tmp), args.nodes, args.hours)
                for _ in range(args.repeat)
            ]
            rows.append(("baseline", {k: median([r[k] for r in runs]) for k in runs[0]}))
    print(f"{args.nodes} nodes x {args.hours:g} h, seed 1; median of {args.repeat} runs\n")
    print(
        table(
            ["path", "simulate s", "load s", "simulate + load s", "server samples", "metrics"],
            [
                [
                    name,
                    f"{m['simulate']:.2f}",
                    f"{m['load']:.2f}",
                    f"{m['total']:.2f}",
                    f"{m['samples']:,.0f}",
                    f"{m['metrics']:,.0f}" if "metrics" in m else "-",
                ]
                for name, m in rows
            ],
        )
    )
    first = rows[0][1]
    print(
        f"\n{first['jobs']:.0f} jobs, {first['records']:,.0f} client records, "
        f"{first['batches']:,.0f} agent batches, {first['mb']:.0f} MB DuckDB file"
        + (f"; analyse {first['analyse']:.2f} s" if args.analyse else "")
    )


if __name__ == "__main__":
    main()
