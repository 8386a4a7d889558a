"""Nothing reaches the store that no real source produces.

The set of what real sources produce is not written down here: it is collected by running
the real agent sources, with the role each simulated host has, over the real captured
trees in tests/cases/collect/ and over trees the simulator renders, two rounds each so
that rates and means exist. Every (kind, metric) of the simulated store's `metrics`, and
every (kind, per-job or total, column) filled in its `server_samples`, must be in it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from iolens.collect.agent import Agent
from iolens.collect.base import Source
from iolens.collect.sources.infiniband import InfinibandSource
from iolens.collect.sources.lnet_router import LnetRouterSource
from iolens.collect.sources.lustre_mds import LustreMdsSource
from iolens.collect.sources.lustre_oss import LustreOssSource
from iolens.collect.sources.node import NodeSource
from iolens.model.batch import Batch
from iolens.simulate import SimConfig
from iolens.simulate.collection import Tree, memory_dir, real_sources
from iolens.store import DuckDBStore
from tests.simulate.stores import load_simulation

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect"
COLUMNS = (
    "read_bytes",
    "write_bytes",
    "read_ops",
    "write_ops",
    "md_ops",
    "wait_us",
    "service_us",
    "queue_len",
    "active_threads",
)
#: What each simulated role runs, by fixture folder.
ROLES = {
    "lustre_oss": ("oss", lambda h: [NodeSource(h, "oss"), LustreOssSource(h)]),
    "lustre_mds": ("mds", lambda h: [NodeSource(h, "mds"), LustreMdsSource(h)]),
    "lnet_router": ("forwarder", lambda h: [LnetRouterSource(h, "forwarder")]),
    "node": ("oss", lambda h: [NodeSource(h, "oss")]),
    "infiniband": ("oss", lambda h: [InfinibandSource(h)]),
}


def _two_rounds(root: Path, sources: list[Source], trees: list[Path] | None = None) -> list[Batch]:
    t = [1000.0]
    agent = Agent("h", root, sources, clock=lambda: t[0])
    out = []
    for tree in trees or [root, root]:
        agent.root = tree
        out.append(agent.collect_round())
        t[0] += 10.0
    return out


def _produced(batches: list[Batch]) -> tuple[set[tuple[str, str]], set[tuple[str, bool, str]]]:
    metrics: set[tuple[str, str]] = set()
    columns: set[tuple[str, bool, str]] = set()
    for b in batches:
        for r in b.metrics.to_pylist():
            if r["kind"] != "agent":
                metrics.add((r["kind"], r["metric"]))
        for r in b.server_samples.to_pylist():
            columns |= {
                (r["kind"], r["job_id"] is not None, c) for c in COLUMNS if r[c] is not None
            }
    return metrics, columns


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("kinds")
    sim = load_simulation(base / "s.duckdb", SimConfig(nodes=1024, hours=0.5, seed=2))
    return base, sim


@pytest.fixture(scope="module")
def real(simulated):
    """(kind, metric) and (kind, per job, column) the real sources produce."""
    _base, sim = simulated
    metrics: set[tuple[str, str]] = set()
    columns: set[tuple[str, bool, str]] = set()
    for source, (_role, build) in ROLES.items():
        for case in sorted(p for p in (CASES / source).iterdir() if p.is_dir()):
            m, c = _produced(_two_rounds(case, build("h")))
            metrics |= m
            columns |= c
    # Trees the simulator renders, two consecutive rounds of every host, busy ones.
    c = sim.collection
    k = c.rounds.count // 2
    scratch = Path(tempfile.mkdtemp(dir=memory_dir()))
    try:
        for h in c.hosts:
            trees = []
            for j in (k, k + 1):
                tree = Tree(scratch / f"{h.name}-{j}")
                tree.update(h.files(c.clock(h.name, j)))
                trees.append(tree.root)
                h.advance(j + 1, c.clock(h.name, j + 1))
            m, cols = _produced(_two_rounds(trees[0], real_sources(h), trees))
            metrics |= m
            columns |= cols
    finally:
        shutil.rmtree(scratch)
    return metrics, columns


def test_every_metric_is_one_a_real_source_produces(simulated, real):
    base, _sim = simulated
    with DuckDBStore(base / "s.duckdb", create=False) as store:
        stored = {
            (r["kind"], r["metric"])
            for r in store.query("SELECT DISTINCT kind, metric FROM metrics").to_pylist()
        }
    assert stored and stored <= real[0], sorted(stored - real[0])


def test_every_server_sample_column_is_one_a_real_source_fills(simulated, real):
    base, _sim = simulated
    checks = " UNION ALL ".join(
        f"SELECT DISTINCT kind, job_id IS NOT NULL AS per_job, '{c}' AS col "
        f"FROM server_samples WHERE {c} IS NOT NULL"
        for c in COLUMNS
    )
    with DuckDBStore(base / "s.duckdb", create=False) as store:
        stored = {(r["kind"], r["per_job"], r["col"]) for r in store.query(checks).to_pylist()}
    assert stored and stored <= real[1], sorted(stored - real[1])


def test_the_simulators_own_fields_are_gone(simulated):
    """What only the old simulator wrote: per-job forwarder rows, queues per OST, a `switch`
    kind, metadata operations under the MDS host instead of its MDT."""
    base, _sim = simulated
    with DuckDBStore(base / "s.duckdb", create=False) as store:
        (n,) = (
            store.query(
                """SELECT count(*) AS n FROM server_samples WHERE
               (kind = 'forwarder' AND job_id IS NOT NULL)
               OR (kind = 'ost' AND (queue_len IS NOT NULL OR active_threads IS NOT NULL))
               OR kind = 'switch'
               OR (kind = 'mds' AND md_ops IS NOT NULL)"""
            )
            .to_pylist()[0]
            .values()
        )
        kinds = {
            r["kind"] for r in store.query("SELECT DISTINCT kind FROM server_samples").to_pylist()
        }
    assert n == 0
    assert kinds == {"ost", "oss", "mdt", "mds", "forwarder", "mdt_client", "fwd_client"}
