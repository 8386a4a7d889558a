"""A small seeded simulation shared by the scale-out tests, and datasets built from it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from bench.scaleout.fleet import Ledger, agent_batches

from iolens.ingest.load import load_many
from iolens.model.batch import Batch
from iolens.simulate import SimConfig, simulate
from iolens.simulate.run import Simulation
from iolens.store import DuckDBStore
from iolens.store.segments import SegmentWriter

GROUPS = ["ga", "gb"]
#: Batches per commit, as an ingest server's group commit takes what arrived meanwhile.
COMMIT_BATCHES = 64


@dataclass
class Site:
    sim: Simulation
    batches: list[tuple[str, Batch]]  # (group, keyed agent batch)
    ledger: Ledger
    reference: Path  # DuckDB file loaded with the same batches through ingest.load_many


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """512 nodes for an hour (about 30 jobs, every fault kind), agents' rounds every 10 s."""
    sim = simulate(SimConfig(nodes=512, hours=1.0, seed=5))
    batches = list(agent_batches(sim, GROUPS, max_rows=4000))
    ledger = Ledger()
    for group, batch in batches:
        ledger.record(group, batch)
    path = tmp_path_factory.mktemp("reference") / "reference.duckdb"
    with DuckDBStore(path) as store:
        for i in range(0, len(batches), COMMIT_BATCHES):
            load_many(store, [b for _, b in batches[i : i + COMMIT_BATCHES]])
    return Site(sim, batches, ledger, path)


def write_dataset(site: Site, root: Path) -> Path:
    """The site's batches written by one in-process segment writer per group, in group
    commits of `COMMIT_BATCHES`."""
    writers = {g: SegmentWriter(root, g, fsync=False) for g in GROUPS}
    pending: dict[str, list[Batch]] = {g: [] for g in GROUPS}
    try:
        for group, batch in site.batches:
            pending[group].append(batch)
            if len(pending[group]) >= COMMIT_BATCHES:
                writers[group].load_many(pending[group])
                pending[group] = []
        for group, rest in pending.items():
            if rest:
                writers[group].load_many(rest)
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
