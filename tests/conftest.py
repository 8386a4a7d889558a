"""Shared fixtures: one seeded 1,024-node x 2 h simulation for the whole session."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from iolens.analyze.pipeline import analyze_jobs
from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@dataclass
class SimDB:
    path: Path
    truth: dict[str, Any]

    def store(self) -> DuckDBStore:
        return DuckDBStore(self.path, create=False)


@pytest.fixture(scope="session")
def sim_db(tmp_path_factory: pytest.TempPathFactory) -> SimDB:
    """The acceptance simulation of issue 2: >= 1,024 nodes, 2 hours, seeded."""
    path = tmp_path_factory.mktemp("sim") / "iolens.duckdb"
    sim = simulate(SimConfig(nodes=1024, hours=2.0, seed=3))
    with DuckDBStore(path) as store:
        sim.load(store)
        analyze_jobs(store)
    return SimDB(path, json.loads(json.dumps(sim.truth, default=float)))


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed `iolens` entry point the way a user would."""
    return subprocess.run(
        [sys.executable, "-m", "iolens", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
