"""Query commands in a fresh process: wall time and peak RSS, as a user at a shell sees them.

    .venv/bin/python bench/cli_latency.py                  # simulates a store, then measures
    .venv/bin/python bench/cli_latency.py --db lab.duckdb  # on an existing (analysed) store
    .venv/bin/python bench/cli_latency.py --src ../old/src # another checkout's code, same store

Every command runs `--runs` times (median and max); `iolens --help` is the start-up floor
measured in the same run. The store is analysed before timing, so the figures are what a
listing costs when there is nothing new to analyse. `--src` puts another checkout's source
first on PYTHONPATH, so two versions compare on one store in one sitting.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import child, table  # noqa: E402

COMMANDS = (
    ["--help"],
    ["jobs", "--json"],
    ["job", "{job}", "--json"],
    ["interference", "{job}", "--json"],
    ["findings", "--json"],
    ["anomalies", "--json"],
    ["load", "--json"],
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--db", type=Path, help="an existing store (default: simulate one)")
    ap.add_argument("--src", type=Path, help="run this checkout's src/ instead")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = str(args.src.resolve())
    iolens = [sys.executable, "-m", "iolens"]
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "lab.duckdb"
        if args.db is None:
            sim = [*iolens, "simulate", "--db", str(db), "--nodes", "1024", "--hours", "2"]
            _, _, rc, out = child([*sim, "--seed", "1"], env=env)
            if rc:
                sys.exit(out)
        _, _, rc, out = child([*iolens, "jobs", "--db", str(db), "--json"], env=env)  # analyse
        if rc:
            sys.exit(out)
        job = _busiest_job(db, iolens, env)
        rows = []
        for cmd in COMMANDS:
            argv = [a.format(job=job) for a in cmd]
            if cmd[0] != "--help":
                argv += ["--db", str(db)]
            walls, rss = [], []
            for _ in range(args.runs):
                wall, peak, rc, out = child([*iolens, *argv], env=env)
                if rc:
                    sys.exit(f"iolens {' '.join(argv)} failed ({rc}):\n{out}")
                walls.append(wall)
                rss.append(peak)
            rows.append(
                [
                    f"`iolens {' '.join(cmd)}`",
                    f"{statistics.median(walls):.2f} / {max(walls):.2f}",
                    f"{statistics.median(rss):.0f}",
                ]
            )
    print(f"code: {args.src or ROOT / 'src'}; {args.runs} runs per command")
    print(table(["command", "wall s (median / max)", "peak RSS, MiB"], rows))


def _busiest_job(db: Path, iolens: list[str], env: dict[str, str]) -> str:
    """The job with the most findings: its report and interference have the most to say."""
    import json

    _, _, _, out = child([*iolens, "jobs", "--db", str(db), "--json"], env=env)
    jobs = json.loads(out)
    return str(max(jobs, key=lambda j: (j.get("findings") or 0, j["job_id"]))["job_id"])


if __name__ == "__main__":
    main()
