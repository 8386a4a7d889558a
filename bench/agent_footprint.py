"""Agent footprint: CPU and resident memory of `iolens agent` sampling at 1 Hz.

Runs the real agent (all sources enabled) for `--seconds` against one node tree merged
from every source's captured fixture (node /proc, Lustre OSS/MDS/client, InfiniBand,
LNet; see tests/collect/trees.py), shipping to a real `iolens serve` on loopback, and
reads the agent process from /proc.

    python bench/agent_footprint.py [--seconds 30] [--root DIR]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.collect.trees import CASES, build_root

from bench.common import table
from bench.ingest_load import free_port, proc_stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--root", type=Path, help="node tree [default: all fixture cases merged]")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        used = "given tree"
        if args.root is None:
            args.root = Path(tmp) / "node"
            args.root.mkdir()
            names = sorted(p.name for p in CASES.iterdir() if p.is_dir())
            used = ", ".join(build_root(args.root, names))
        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "iolens",
                "serve",
                "--db",
                f"{tmp}/a.duckdb",
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(300):
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "iolens",
                "agent",
                "--root",
                str(args.root),
                "--interval",
                "1",
                "--spool",
                f"{tmp}/spool",
                "--server",
                f"http://127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(3)  # imports and the first round are start-up, not steady state
        cpu0, _ = proc_stats(agent.pid)
        t0 = time.monotonic()
        peak = 0
        while time.monotonic() - t0 < args.seconds:
            peak = max(peak, proc_stats(agent.pid)[1])
            time.sleep(0.5)
        cpu1, rss = proc_stats(agent.pid)
        elapsed = time.monotonic() - t0
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)
        rows = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    batches = next(
        (
            line.split()[-1]
            for line in rows.splitlines()
            if line.startswith('iolens_ingest_batches_total{result="ok"}')
        ),
        "0",
    )
    print(
        f"agent at 1 Hz on {used}"
        f" for {elapsed:.0f} s; the server acknowledged {float(batches):.0f} batches\n"
    )
    print(
        table(
            ["figure", "value"],
            [
                ["agent CPU (of one core)", f"{100 * (cpu1 - cpu0) / elapsed:.2f} %"],
                ["agent RSS (steady / peak)", f"{rss / 2**20:.0f} / {peak / 2**20:.0f} MiB"],
            ],
        )
    )


if __name__ == "__main__":
    main()
