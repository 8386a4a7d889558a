"""Diagnosis accuracy against the simulator's ground truth (issue 5, docs/accuracy.md).

For every (size, seed): simulate, ingest into a fresh DuckDB file, run every analysis
(`analyze_all`), then score the stored `anomalies` per fault kind and the `interference`
victim -> culprit pairs against the truth. Development seeds and held-out seeds are
separate sets: tune on `--set dev`, report `--set holdout` once at the end.

    python bench/accuracy.py [--set dev|holdout|both] [--sizes 512,1024] [--hours 2]
    python bench/accuracy.py --fault-free      # false alarms with no injected faults
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from iolens.analyze.pipeline import analyze_all
from iolens.simulate import SimConfig, simulate
from iolens.simulate.score import FAULT_KINDS, Score, score_episodes, score_pairs
from iolens.store import DuckDBStore

SEEDS = {"dev": [1, 2, 3, 4, 5, 6], "holdout": [101, 102, 103, 104, 105, 106]}


def run_one(nodes: int, hours: float, seed: int, faults: bool = True) -> dict[str, Any]:
    sim = simulate(SimConfig(nodes=nodes, hours=hours, seed=seed, faults=faults))
    truth = json.loads(json.dumps(sim.truth, default=float))
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "a.duckdb") as store:
        sim.load(store)
        t0 = time.perf_counter()
        analyze_all(store)
        took = time.perf_counter() - t0
        anomalies = store.query("SELECT * FROM anomalies").to_pylist()
        pairs = store.query("SELECT DISTINCT victim, culprit FROM interference").to_pylist()
        critical = store.query(
            "SELECT subject_id, code FROM findings WHERE severity = 'critical'"
        ).to_pylist()
    return {
        "truth": truth,
        "episodes": score_episodes(truth["faults"], anomalies),
        "pairs": score_pairs(truth["interference"], pairs),
        "critical": critical,
        "analysis_s": took,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=["dev", "holdout", "both"], default="dev")
    ap.add_argument("--sizes", default="512,1024", help="compute node counts, comma-separated")
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--fault-free", action="store_true", help="no injected faults")
    ap.add_argument("--verbose", action="store_true", help="list misses and false alarms")
    args = ap.parse_args()
    seeds = SEEDS["dev"] + SEEDS["holdout"] if args.set == "both" else SEEDS[args.set]
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds: dict[str, Score] = {k: Score() for k in FAULT_KINDS}
    pairs = Score()
    critical = 0
    runs = 0
    for nodes in sizes:
        for seed in seeds:
            r = run_one(nodes, args.hours, seed, faults=not args.fault_free)
            runs += 1
            for kind, s in r["episodes"].items():
                kinds.setdefault(kind, Score()).add(s)
            pairs.add(r["pairs"])
            critical += len(r["critical"])
            print(
                f"nodes={nodes} seed={seed}: analysis {r['analysis_s']:.1f} s, "
                f"{sum(s.true_pos + s.false_pos for s in r['episodes'].values())} episodes, "
                f"{r['pairs'].true_pos + r['pairs'].false_pos} pairs",
                file=sys.stderr,
            )
            if args.verbose:
                for kind, s in r["episodes"].items():
                    for m in s.misses:
                        print(f"  MISS {kind}: {m}", file=sys.stderr)
                    for fa in s.false_alarms:
                        print(f"  FALSE {kind}: {fa}", file=sys.stderr)
                for m in r["pairs"].misses:
                    print(f"  MISS pair {m}", file=sys.stderr)
                for fa in r["pairs"].false_alarms:
                    print(f"  FALSE pair {fa}", file=sys.stderr)
    label = "fault-free" if args.fault_free else args.set
    print(f"\n{runs} simulations ({label} seeds {seeds}, sizes {sizes}, {args.hours} h)\n")
    rows = [
        [
            kind,
            str(s.found + s.missed),
            str(s.true_pos + s.false_pos),
            f"{s.precision:.2f}",
            f"{s.recall:.2f}",
        ]
        for kind, s in sorted(kinds.items())
    ]
    rows.append(
        [
            "victim -> culprit pairs",
            str(pairs.found + pairs.missed),
            str(pairs.true_pos + pairs.false_pos),
            f"{pairs.precision:.2f}",
            f"{pairs.recall:.2f}",
        ]
    )
    print(table(["kind", "true", "detected", "precision", "recall"], rows))
    print(f"\ncritical findings: {critical} ({critical / runs:.2f} per simulation)")


if __name__ == "__main__":
    main()
