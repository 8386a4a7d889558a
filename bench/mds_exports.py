"""lustre_mds on an MDS with thousands of client exports: agent time per round, state kept.

Copies the DDN 2.14 MDS case (tests/cases/collect/lustre_mds/ddn-2.14-ai400x2-exports) and
its first client's `exports/<nid>/stats` to `--clients` more NIDs, then runs the real agent
with the `lustre_mds` source for a few rounds, nothing changing between them (every client
idle): the cost an MDS pays for per-client counters, and that idle clients ship no rows.

    python bench/mds_exports.py [--clients 5000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from iolens.collect.agent import Agent
from iolens.collect.sources.lustre_mds import LustreMdsSource

CASE = (
    Path(__file__).resolve().parents[1] / "tests/cases/collect/lustre_mds/ddn-2.14-ai400x2-exports"
)
EXPORTS = "proc/fs/lustre/mdt/ai400x2-MDT0000/exports"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "mds"
        shutil.copytree(CASE, root)
        exports = root / EXPORTS
        text = (exports / "192.168.0.100@o2ib" / "stats").read_text()
        for i in range(args.clients):
            client = exports / f"10.1.{i // 250}.{i % 250}@o2ib"
            client.mkdir()
            (client / "stats").write_text(text)
        n = sum(1 for p in exports.iterdir() if p.is_dir())
        now = [1_000.0]
        agent = Agent("mds1", root, [LustreMdsSource("mds1")], clock=lambda: now[0])
        rows = []
        for k in range(args.rounds):
            now[0] += 10.0
            started = time.perf_counter()
            batch = agent.collect_round()
            took = time.perf_counter() - started
            shipped = 0 if batch.metrics is None else batch.metrics.num_rows
            clients = (
                0
                if batch.metrics is None
                else sum(
                    1 for kind in batch.metrics.column("kind").to_pylist() if kind == "mdt_client"
                )
            )
            rows.append(
                [str(k), f"{took:.2f}", str(shipped), str(clients), str(len(agent.rates.last))]
            )
    print(f"{n} client exports")
    print(table(["round", "seconds", "metric rows", "mdt_client rows", "counters kept"], rows))


if __name__ == "__main__":
    main()
