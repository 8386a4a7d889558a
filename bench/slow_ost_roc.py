"""Recall, precision, time to detect and false episodes of the fail-slow test (slow_ost).

Runs the detector's own statistics (`iolens.analyze.components.shift`: the same
`standardise` and `segments` that `slow_ost` calls on the store's series) on per-minute
latency series generated here, so thousands of runs take minutes. The data, per run:

- `--osts` OSTs busy in ~95 % of minutes (idle minutes at random), `--minutes` long (a
  day: the detector learns each OST's usual level from its loaded history, 96 h in
  service, so a run much shorter than the fault would understate it);
- per OST a fixed speed (log-normal, sd 0.15: real OSTs of one pool differ by 10-30 %,
  the DDN AI400X2 capture's two OSTs by 27 % on reads), a shared load factor (AR(1) 0.9
  in log, sd 0.3: busy hours slow every OST), and the OST's own noise: log-normal with sd
  `--sigma`, AR(1) `--ar1` (defaults: `iolens.simulate.realism.Realism`'s `service_sigma`
  and `service_ar1`), per minute, or per agent sample averaged over each minute with
  `--samples-per-minute 6` (how `Realism` defines them: 10-s samples);
- bytes per RPC varying per OST and minute (log sd 0.3) with latency ~ size^0.6, and a
  write share with writes 1.5x dearer, so the work normalisation is exercised;
- with a fault: one OST's latency multiplied by the magnitude for the duration,
  starting at a random minute after the first hour.

A fault counts as found when an episode on its OST overlaps it (2 minutes of slack);
every other episode is a false one. Time to detect: the alarm's minute minus the fault's
first. Fault-free runs (`--free-days`, a week each) give false episodes per 100
component-days. Seeds are drawn fresh at each run and printed; `--seed` repeats one.

    python bench/slow_ost_roc.py                            # docs/diagnosis.md, slow_ost
    python bench/slow_ost_roc.py --samples-per-minute 6     # Realism's noise as it means it
    python bench/slow_ost_roc.py --osts 12 | --sigma 0.5    # more peers | twice the noise
    python bench/slow_ost_roc.py --runs 20 --free-days 56   # quicker
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from iolens.analyze.components.peers import SlowThresholds
from iolens.analyze.components.shift import segments, standardise
from iolens.simulate.realism import Realism

MAGNITUDES = (1.5, 2.0, 3.0, 5.0, 10.0)
DURATIONS = (5, 20, 60)
SLACK = 2


@dataclass
class Cell:
    found: int = 0
    faults: int = 0
    true_eps: int = 0
    false_eps: int = 0
    delays: list[float] | None = None

    def add(self, other: Cell) -> None:
        self.found += other.found
        self.faults += other.faults
        self.true_eps += other.true_eps
        self.false_eps += other.false_eps
        self.delays = (self.delays or []) + (other.delays or [])


def ar1(rng: np.random.Generator, shape: tuple[int, int], sigma: float, phi: float) -> np.ndarray:
    """Stationary AR(1) series along the last axis, standard deviation `sigma`."""
    rows, cols = shape
    eps = rng.normal(0.0, sigma * math.sqrt(1 - phi * phi), shape)
    x = np.empty(shape)
    x[:, 0] = rng.normal(0.0, sigma, rows)
    for t in range(1, cols):
        x[:, t] = phi * x[:, t - 1] + eps[:, t]
    return x


def series(
    rng: np.random.Generator, osts: int, minutes: int, sigma: float, phi: float, per_minute: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Latency (us), busy mask, bytes per RPC and write share [ost, minute], fault-free.

    The OST's own noise is drawn per agent sample (`per_minute` samples a minute, 1 when
    `sigma` and `phi` are per-minute values) and averaged over the minute."""
    speed = np.exp(rng.normal(0.0, 0.15, (osts, 1)))
    load = np.exp(ar1(rng, (1, minutes), 0.3, 0.9))
    own = np.exp(ar1(rng, (osts, minutes * per_minute), sigma, phi))
    own = own.reshape(osts, minutes, per_minute).mean(axis=2)
    size = 2**20 * np.exp(rng.normal(0.0, 0.3, (osts, minutes)))
    writes = rng.uniform(0.0, 1.0, (osts, minutes))
    work = (size / 2**20) ** 0.6 * (1 + 0.5 * writes)
    latency = 2000.0 * speed * load * own * work
    busy = rng.random((osts, minutes)) < 0.95
    return latency, busy, size, writes


def detect(latency, busy, size, writes, th: SlowThresholds):
    p = th.shift()
    sh = standardise(latency, busy, size, writes, p)
    return segments(sh.u, p.k, p.h, p.max_idle)


def fault_run(rng, args, th, magnitude: float, duration: int) -> Cell:
    latency, busy, size, writes = series(
        rng, args.osts, args.minutes, args.sigma, args.ar1, args.samples_per_minute
    )
    victim = int(rng.integers(args.osts))
    start = int(rng.integers(60, args.minutes - duration - 30))
    latency[victim, start : start + duration] *= magnitude
    cell = Cell(faults=1, delays=[])
    for i, segs in enumerate(detect(latency, busy, size, writes, th)):
        for s in segs:
            hit = i == victim and s.start <= start + duration - 1 + SLACK and s.end >= start - SLACK
            if hit:
                cell.true_eps += 1
                if not cell.found:
                    cell.found = 1
                    cell.delays.append(s.alarm + 1 - start)
            else:
                cell.false_eps += 1
    return cell


def free_runs(rng, args, th) -> tuple[int, float]:
    """False episodes and component-days over fault-free runs of one week each."""
    days_per_run = 7
    runs = max(1, math.ceil(args.free_days / (args.osts * days_per_run)))
    false = 0
    for _ in range(runs):
        latency, busy, size, writes = series(
            rng, args.osts, days_per_run * 1440, args.sigma, args.ar1, args.samples_per_minute
        )
        false += sum(len(s) for s in detect(latency, busy, size, writes, th))
    return false, runs * args.osts * days_per_run


def main() -> None:
    real = Realism()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osts", type=int, default=4)
    ap.add_argument("--minutes", type=int, default=1440, help="length of each fault run")
    ap.add_argument("--sigma", type=float, default=real.service_sigma)
    ap.add_argument("--ar1", type=float, default=real.service_ar1)
    ap.add_argument(
        "--samples-per-minute",
        type=int,
        default=1,
        help="6: --sigma/--ar1 are per 10-s agent sample (as Realism's), averaged per minute",
    )
    ap.add_argument("--runs", type=int, default=200, help="runs per magnitude x duration")
    ap.add_argument("--free-days", type=float, default=1000, help="fault-free component-days")
    ap.add_argument("--seed", type=int, default=None, help="repeat a printed seed")
    ap.add_argument("--k", type=float, default=SlowThresholds.k, help="CUSUM reference value")
    ap.add_argument("--false-alarm-minutes", type=float, default=SlowThresholds.false_alarm_minutes)
    ap.add_argument("--magnitudes", default=",".join(f"{m:g}" for m in MAGNITUDES))
    ap.add_argument("--durations", default=",".join(str(d) for d in DURATIONS))
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    th = SlowThresholds(k=args.k, false_alarm_minutes=args.false_alarm_minutes)
    p = th.shift()
    per = "minute" if args.samples_per_minute == 1 else f"{60 // args.samples_per_minute}-s sample"
    print(
        f"seed {seed}; {args.osts} OSTs, noise sigma {args.sigma} ar1 {args.ar1} per {per}; "
        f"CUSUM k={p.k} h={p.h:.2f} (false_alarm_minutes={p.false_alarm_minutes:g}); "
        f"{args.runs} runs of {args.minutes} min per cell"
    )
    t0 = time.perf_counter()
    rows = []
    for duration in (int(x) for x in args.durations.split(",")):
        for magnitude in (float(x) for x in args.magnitudes.split(",")):
            cell = Cell(delays=[])
            for _ in range(args.runs):
                cell.add(fault_run(rng, args, th, magnitude, duration))
            recall = cell.found / cell.faults
            eps = cell.true_eps + cell.false_eps
            precision = cell.true_eps / eps if eps else float("nan")
            d = cell.delays or []
            rows.append(
                [
                    f"{magnitude:g}x",
                    f"{duration} min",
                    f"{recall:.2f}",
                    f"{precision:.2f}",
                    f"{np.median(d):.0f}" if d else "-",
                    f"{np.percentile(d, 90):.0f}" if d else "-",
                ]
            )
    false, days = free_runs(rng, args, th)
    print(
        table(
            ["fault", "duration", "recall", "precision", "detect (median min)", "detect (p90 min)"],
            rows,
        )
    )
    print(
        f"\nfault-free: {false} false episodes in {days:g} component-days = "
        f"{100 * false / days:.2f} per 100 component-days"
    )
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
