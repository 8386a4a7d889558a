"""A small seeded simulation shared by the scale-out tests, and datasets built from it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from bench.scaleout.fleet import Ledger, agent_batches

from iolens.ingest import load
from iolens.model.batch import Batch
from iolens.simulate import SimConfig, simulate
from iolens.simulate.run import Simulation
from iolens.store import DuckDBStore
from iolens.store.segments import SegmentWriter

GROUPS = ["ga", "gb"]


@dataclass
class Site:
    sim: Simulation
    batches: list[tuple[str, Batch]]  # (group, keyed agent batch)
    ledger: Ledger
    reference: Path  # DuckDB file loaded with the same batches through ingest.load


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """512 nodes for an hour: nine-odd jobs, every fault kind, one interference pair."""
    sim = simulate(SimConfig(nodes=512, hours=1.0, seed=5))
    batches = list(agent_batches(sim, GROUPS, max_rows=4000))
    ledger = Ledger()
    path = tmp_path_factory.mktemp("reference") / "reference.duckdb"
    with DuckDBStore(path) as store:
        for group, batch in batches:
            ledger.record(group, batch)
            load(store, batch)
    return Site(sim, batches, ledger, path)


def write_dataset(site: Site, root: Path) -> Path:
    """The site's batches written by one in-process segment writer per group."""
    writers = {g: SegmentWriter(root, g, fsync=False) for g in GROUPS}
    try:
        for group, batch in site.batches:
            writers[group].load_many([batch])
    finally:
        for w in writers.values():
            w.close()
    return root


@pytest.fixture(scope="session")
def dataset(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as a dataset (first pass only), never analysed: copy it before writing."""
    return write_dataset(site, tmp_path_factory.mktemp("dataset") / "ds")


def copy_dataset(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
    return dst
