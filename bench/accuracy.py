"""Diagnosis accuracy as curves, on seeds drawn fresh at each run (issue 17, docs/accuracy.md).

Sweeps the fail-slow faults the detectors must find (an OST and a forwarder serving each
request `magnitude` times slower for `minutes`) at the calibrated noise and at twice it,
on 1,024-node simulations whose every server sample goes through the real agent's
arithmetic (the simulator's fast path, equal to the real files by test). Per detector
and cell: precision, recall and time-to-detect (the CUSUM's alarm, evidence `detected`,
minus the fault's start). Each simulation also carries a metadata storm, the planted
read-ahead thrashing and the N-1 neighbours, scored as they come. Fault-free runs give
the false episodes per 100 component-days. Victim -> culprit pairs and `n1_interference`
episodes (Beacon's criterion on both sides) are scored on every run.

    python bench/accuracy.py                         # the full sweep (about 1.5 h here)
    python bench/accuracy.py --magnitudes 2 --minutes 20 --runs 3
    python bench/accuracy.py --fault-free-hours 48   # false alarms only
    python bench/accuracy.py --seeds 11,12 ...       # re-run chosen seeds

The seeds are printed first; `--plot FILE` draws the recall curves, `--json FILE` keeps
every figure.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from iolens.analyze.components.peers import SlowThresholds
from iolens.analyze.pipeline import analyze_all
from iolens.simulate import SimConfig, simulate
from iolens.simulate.score import Score, score_episodes, score_pairs
from iolens.store import DuckDBStore

SWEPT = ("slow_ost", "slow_forwarder")
#: A fault is observable when its component was busy (>= 10 requests, the detectors'
#: `min_requests`) in at least as many of the fault's minutes as an episode needs
#: (`SlowThresholds.min_busy_minutes`): a server nobody asks anything shows no latency to
#: anyone, real monitor or iolens, and a shorter burst of slowness is, by design, not an
#: episode (docs/diagnosis.md, slow_ost). Recall is given both ways.
OBSERVABLE = SlowThresholds().min_busy_minutes
ALSO = ("metadata_storm", "cache_thrashing", "n1_interference")
#: Kinds that are faults (a fault-free run must not raise them); the planted scenarios
#: (thrashing, N-1 neighbours) are application behaviour and stay in fault-free runs.
FAULT_KINDS = ("slow_ost", "slow_forwarder", "metadata_storm", "low_bandwidth")


@dataclass
class Cell:
    """One (kind, magnitude, minutes, noise) cell: scores and detection delays."""

    score: Score = field(default_factory=Score)
    delays_s: list[float] = field(default_factory=list)
    observable: int = 0  # faults their component served load through (`OBSERVABLE`)
    observable_found: int = 0


def _t(s: str | datetime) -> datetime:
    if isinstance(s, datetime):
        return s
    return datetime.fromisoformat(s.replace("Z", ""))


def _busy_minutes(store: DuckDBStore, fault: dict[str, Any]) -> int:
    """Minutes of the fault in which its component served >= 10 data requests (object
    operations such as `statfs` ping every OST all the time and are not demand)."""
    t = store.query(
        "SELECT count(*) AS n FROM (SELECT date_trunc('minute', ts) AS m FROM server_samples "
        "WHERE job_id IS NULL AND kind IN ('ost', 'forwarder') AND component_id = ? "
        "AND ts > ? AND ts <= ? + INTERVAL 1 MINUTE GROUP BY m "
        "HAVING sum(coalesce(read_ops, 0) + coalesce(write_ops, 0)) >= 10)",
        [fault["component"], _t(fault["start"]), _t(fault["end"])],
    )
    return int(t.column("n")[0].as_py())


def run_one(config: SimConfig) -> dict[str, Any]:
    sim = simulate(config)
    truth = json.loads(json.dumps(sim.truth, default=float))
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "a.duckdb") as store:
        sim.load(store)
        t0 = time.perf_counter()
        analyze_all(store)
        took = time.perf_counter() - t0
        anomalies = store.query("SELECT * FROM anomalies").to_pylist()
        pairs = store.query("SELECT DISTINCT victim, culprit FROM interference").to_pylist()
        busy = {(f["component"], f["start"]): _busy_minutes(store, f) for f in truth["faults"]}
        n_components = (
            store.query(
                "SELECT count(DISTINCT component_id) AS n FROM server_samples "
                "WHERE job_id IS NULL AND kind IN ('ost', 'forwarder', 'mdt')"
            )
            .column("n")[0]
            .as_py()
        )
    scores = score_episodes(truth["faults"], anomalies)
    delays: dict[str, list[float]] = defaultdict(list)
    witnessed: dict[str, list[tuple[bool, bool]]] = defaultdict(list)  # (observable, found)
    for f in truth["faults"]:
        found = [
            a
            for a in anomalies
            if a["kind"] == f["kind"]
            and a["component_id"] == f["component"]
            and a["start"] <= _t(f["end"])
            and (a["end"] is None or a["end"] >= _t(f["start"]))
        ]
        if f["kind"] in SWEPT:
            witnessed[f["kind"]].append(
                (busy[(f["component"], f["start"])] >= OBSERVABLE, bool(found))
            )
        for a in found[:1]:
            detected = json.loads(a["evidence"] or "{}").get("detected")
            at = _t(detected) if detected else a["start"]
            delays[f["kind"]].append((at - _t(f["start"])).total_seconds())
    return {
        "scores": scores,
        "delays": delays,
        "witnessed": witnessed,
        "pairs": score_pairs(truth["interference"], pairs),
        "anomalies": anomalies,
        "components": n_components,
        "analysis_s": took,
    }


def sweep(args: argparse.Namespace, seeds: list[int]) -> dict[tuple, Cell]:
    cells: dict[tuple, Cell] = defaultdict(Cell)
    pairs, also = Score(), {k: Score() for k in ALSO}
    it = iter(seeds)
    for noise in args.noise:
        for minutes in args.minutes:
            for mag in args.magnitudes:
                for _ in range(args.runs):
                    seed = next(it)
                    hours = max(2.0, (minutes + 60) / 60)
                    config = SimConfig(
                        nodes=args.nodes,
                        hours=hours,
                        seed=seed,
                        ost_slow_factor=mag,
                        ost_slow_minutes=minutes,
                        forwarder_slow_factor=mag,
                        forwarder_slow_minutes=minutes,
                        noise_scale=noise,
                    )
                    r = run_one(config)
                    for kind in SWEPT:
                        c = cells[(kind, mag, minutes, noise)]
                        c.score.add(r["scores"][kind])
                        c.delays_s += r["delays"].get(kind, [])
                        for seen, hit in r["witnessed"].get(kind, []):
                            c.observable += seen
                            c.observable_found += seen and hit
                    for kind in ALSO:
                        also[kind].add(r["scores"][kind])
                    pairs.add(r["pairs"])
                    s = {k: r["scores"][k] for k in SWEPT}
                    print(
                        f"seed {seed}: {mag}x {minutes} min noise x{noise}: "
                        + ", ".join(
                            f"{k} found {v.found}/{v.found + v.missed} false {v.false_pos}"
                            for k, v in s.items()
                        )
                        + f" (analysis {r['analysis_s']:.1f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
    cells[("pairs",)] = Cell(pairs)
    for k, v in also.items():
        cells[(k,)] = Cell(v)
    return cells


def fault_free(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """False episodes per 100 component-days on runs without injected faults."""
    false: dict[str, int] = defaultdict(int)
    component_days = 0.0
    for seed in seeds:
        r = run_one(
            SimConfig(nodes=args.nodes, hours=args.fault_free_hours, seed=seed, faults=False)
        )
        component_days += r["components"] * args.fault_free_hours / 24
        for a in r["anomalies"]:
            if a["kind"] in FAULT_KINDS:
                false[a["kind"]] += 1
        print(
            f"fault-free seed {seed}: {args.fault_free_hours} h, "
            f"{sum(1 for a in r['anomalies'] if a['kind'] in FAULT_KINDS)} false episodes",
            file=sys.stderr,
            flush=True,
        )
    return {
        "component_days": component_days,
        "false_episodes": dict(false),
        "per_100_component_days": {k: 100 * false.get(k, 0) / component_days for k in FAULT_KINDS}
        if component_days
        else {},
    }


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def report(cells: dict[tuple, Cell], free: dict[str, Any] | None) -> str:
    rows = []
    for key, c in sorted((k, v) for k, v in cells.items() if len(k) == 4):
        kind, mag, minutes, noise = key
        s = c.score
        d = _median(c.delays_s)
        rows.append(
            [
                kind,
                f"{mag:g}x",
                f"{minutes:g}",
                f"x{noise:g}",
                f"{s.found}/{s.found + s.missed}",
                f"{s.recall:.2f}",
                f"{c.observable_found}/{c.observable}",
                f"{s.precision:.2f}",
                "-" if d is None else f"{d / 60:.1f}",
            ]
        )
    out = [
        table(
            [
                "detector",
                "slowdown",
                "minutes",
                "noise",
                "found",
                "recall",
                "found, observable",
                "precision",
                "detect (min)",
            ],
            rows,
        )
    ]
    other = [
        [
            k[0],
            f"{c.score.found}/{c.score.found + c.score.missed}",
            f"{c.score.recall:.2f}",
            f"{c.score.precision:.2f}",
        ]
        for k, c in sorted(cells.items())
        if len(k) == 1
    ]
    out.append(table(["also scored", "found", "recall", "precision"], other))
    if free:
        out.append(
            f"fault-free: {free['component_days']:.1f} component-days, false episodes "
            + ", ".join(
                f"{k} {free['false_episodes'].get(k, 0)} ({v:.2f} per 100 component-days)"
                for k, v in free["per_100_component_days"].items()
            )
        )
    return "\n\n".join(out)


def plot(cells: dict[tuple, Cell], path: Path) -> None:
    """Per detector: recall over every fault (top) and the median time to detect (bottom),
    against the slowdown, one line per duration and noise level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in cells if len(k) == 4]
    minutes = sorted({k[2] for k in keys})
    noises = sorted({k[3] for k in keys})
    fig, axes = plt.subplots(2, len(SWEPT), figsize=(5 * len(SWEPT), 6.4), sharex=True)
    for col, kind in enumerate(SWEPT):
        top, bottom = axes[0][col], axes[1][col]
        for m in minutes:
            for n in noises:
                mine = sorted(k for k in keys if k[0] == kind and k[2] == m and k[3] == n)
                if not mine:
                    continue
                style = {
                    "color": f"C{minutes.index(m) * len(noises) + noises.index(n)}",
                    "marker": "o",
                    "linestyle": "-" if n == noises[0] else "--",
                    "label": f"{m:g} min, noise x{n:g}",
                }
                top.plot([k[1] for k in mine], [cells[k].score.recall for k in mine], **style)
                timed = [(k[1], _median(cells[k].delays_s)) for k in mine if cells[k].delays_s]
                if timed:
                    bottom.plot(*zip(*[(x, d / 60) for x, d in timed], strict=True), **style)
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_xticks([1.5, 2, 3, 5, 10], ["1.5", "2", "3", "5", "10"])
            ax.minorticks_off()
        top.set_ylim(-0.05, 1.05)
        top.axhline(0.9, color="grey", linewidth=0.5)
        top.set_title(kind)
        bottom.set_xlabel("slowdown (x)")
    axes[0][0].set_ylabel("recall (every fault)")
    axes[1][0].set_ylabel("time to detect (min, median)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def load(path: Path) -> tuple[dict[tuple, Cell], dict[str, Any] | None]:
    """The cells and fault-free figures a `--json` run saved."""
    data = json.loads(path.read_text())
    cells: dict[tuple, Cell] = {}
    for c in data["cells"]:
        true_pos, found, n = c["true_pos"], c["found"], c["true"]
        score = Score(true_pos=true_pos, false_pos=c["false_pos"], found=found, missed=n - found)
        cells[tuple(c["key"])] = Cell(
            score, c["delays_s"], c.get("observable", 0), c.get("observable_found", 0)
        )
    return cells, data.get("fault_free")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--magnitudes", default="1.5,2,3,5,10")
    ap.add_argument("--minutes", default="5,20,60")
    ap.add_argument("--noise", default="1,2", help="multiples of the calibrated noise")
    ap.add_argument("--runs", type=int, default=1, help="simulations per cell")
    ap.add_argument("--fault-free-runs", type=int, default=2)
    ap.add_argument("--fault-free-hours", type=float, default=24.0)
    ap.add_argument("--no-sweep", action="store_true", help="fault-free runs only")
    ap.add_argument("--seeds", help="comma-separated seeds instead of fresh ones")
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--from-json", type=Path, help="report and plot a saved --json run")
    args = ap.parse_args()
    if args.from_json:
        cells, free = load(args.from_json)
        print(report(cells, free))
        if args.plot:
            plot(cells, args.plot)
        return
    args.magnitudes = [float(x) for x in args.magnitudes.split(",")]
    args.minutes = [float(x) for x in args.minutes.split(",")]
    args.noise = [float(x) for x in args.noise.split(",")]
    n_sweep = (
        0
        if args.no_sweep
        else (len(args.magnitudes) * len(args.minutes) * len(args.noise) * args.runs)
    )
    n = n_sweep + args.fault_free_runs
    if args.seeds:
        seeds = [int(s) for s in args.seeds.split(",")]
        if len(seeds) < n:
            ap.error(f"{n} seeds needed, {len(seeds)} given")
    else:
        seeds = [random.SystemRandom().randrange(1, 2**31) for _ in range(n)]
    print(f"seeds: {','.join(map(str, seeds))}", flush=True)
    cells = {} if args.no_sweep else sweep(args, seeds[:n_sweep])
    free = fault_free(args, seeds[n_sweep:]) if args.fault_free_runs else None
    print(report(cells, free))
    if args.plot and cells:
        plot(cells, args.plot)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "seeds": seeds,
                    "cells": [
                        {
                            "key": list(k),
                            "found": c.score.found,
                            "true": c.score.found + c.score.missed,
                            "true_pos": c.score.true_pos,
                            "false_pos": c.score.false_pos,
                            "delays_s": c.delays_s,
                            "observable": c.observable,
                            "observable_found": c.observable_found,
                        }
                        for k, c in cells.items()
                    ],
                    "fault_free": free,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
