"""The real path and the fast path give the same store.

The real path renders every server's files each agent round and reads them with the real
agent and its real sources (`lustre_oss`, `lustre_mds`, `iofwd`, `node`, `infiniband`), and
writes every process's client records as a tracer file read back by the real decoder; the
fast path hands the agent's arithmetic the readings those sources would take, and the
records directly. Equal stores, table by table and row by row, on a small cluster with every
disturbance switched on (restarts, lost rounds, skewed clocks).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iolens.collect.replay import Replay
from iolens.simulate import SimConfig, simulate
from iolens.simulate.collection import memory_dir
from iolens.simulate.realism import Realism
from iolens.store import DuckDBStore
from tests.simulate.stores import differences, load_simulation

#: Disturbances far more often than the fitted ones, so a short run has each of them.
STORMY = replace(Realism(), resets_per_day=150.0, missing_share=0.04, clock_skew_s=2.0)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path, Any]]:
    base = tmp_path_factory.mktemp("paths")
    trees = Path(tempfile.mkdtemp(dir=memory_dir()))  # in RAM, as /proc is
    config = SimConfig(nodes=128, hours=0.25, seed=5, realism=STORMY)
    files = base / "files.duckdb"
    sim = load_simulation(files, replace(config, collect="files"), workdir=trees)
    direct = base / "direct.duckdb"
    load_simulation(direct, replace(config, collect="direct"))
    yield files, direct, trees, sim
    shutil.rmtree(trees)


def test_both_paths_give_the_same_store(both):
    files, direct, _trees, _sim = both
    diff = differences(files, direct)
    assert diff["server_samples"][0] > 500 and diff["metrics"][0] > 10_000
    assert diff["client_io"][0] > 1_000 and diff["files"][0] > 100
    # the real path's trace batches carry each process's key (`trace:<host>:<pid>:<t>`,
    # as `iolens import trace` gives them); the fast path loads the same records unkeyed
    traced = diff["ingested"][1]
    assert {t: d for t, d in diff.items() if (d[1] or d[2]) and t != "ingested"} == {}
    assert diff["ingested"][2] == 0 and traced == _processes(files)


def _processes(path: Path) -> int:
    """Trace-file keys in the store, and check there is one per traced process."""
    with DuckDBStore(path, create=False) as s:
        keys = s.query("SELECT count(*) AS n FROM ingested WHERE key LIKE 'trace:%'")
        procs = s.query("SELECT count(DISTINCT (job_id, node, pid)) AS n FROM client_io")
        n = keys.column("n")[0].as_py()
        assert n == procs.column("n")[0].as_py()
        return n


def test_the_run_had_every_disturbance(both):
    _files, _direct, _trees, sim = both
    d = sim.collection.disturbances
    assert any(d.resets.values()), "no server restarted"
    assert any(m.any() for m in d.missing.values()), "no round was lost"
    assert len({round(s, 3) for s in d.skew.values()}) == len(d.skew), "clocks agree exactly"


def test_the_real_path_read_real_files(both):
    """The trees the agents read are there: Lustre's own layout, one per host."""
    _files, _direct, trees, sim = both
    hosts = {h.name for h in sim.collection.hosts}
    assert {p.name for p in trees.iterdir()} == hosts
    oss = sim.topology.oss[0]
    assert (trees / oss / "proc/fs/lustre/obdfilter/lustre-OST0000/job_stats").is_file()
    assert (trees / oss / "sys/kernel/debug/lustre/ost/OSS/ost_io/stats").is_file()
    mds = trees / sim.topology.mds / "proc/fs/lustre/mdt" / sim.topology.mdt
    assert (mds / "md_stats").is_file()
    assert (mds / "exports" / sim.topology.nid(sim.topology.login) / "stats").is_file()
    fwd = sim.topology.forwarders[0]
    assert (trees / fwd / "run/iofwd/lwfs/stats").is_file()
    assert list((trees / fwd / "run/iofwd/lwfs/clients").glob("cn*/stats"))


def test_a_hosts_rounds_replay_as_captures_into_the_same_rows(tmp_path):
    """Saved as capture folders, a simulated OSS's files are what `iolens import lustre`
    takes from a site's cron captures, and give that host's rows of the fast path."""
    config = SimConfig(nodes=128, hours=0.1, seed=9, realism=STORMY)
    host = "oss01"
    captures = Path(tempfile.mkdtemp(dir=memory_dir()))
    try:
        folders = simulate(config).collection.write_captures(captures, host)
        replayed = [b for _sample, b in Replay(captures, host=host, role="oss").batches()]
    finally:
        shutil.rmtree(captures)
    direct = [b for _n, b in simulate(config).batches() if b.source == f"agent:{host}"]
    assert folders == len(replayed) == len(direct) > 30
    for table in ("server_samples", "metrics"):
        got = sorted(map(repr, pa.concat_tables([getattr(b, table) for b in replayed]).to_pylist()))
        want = sorted(map(repr, pa.concat_tables([getattr(b, table) for b in direct]).to_pylist()))
        assert got == want, table
    assert [b.key for b in replayed] == [b.key for b in direct]
