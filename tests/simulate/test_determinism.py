"""Same seed, same cluster, same store; another seed, another cluster."""

from __future__ import annotations

from pathlib import Path

from iolens.simulate import SimConfig, simulate
from tests.simulate.stores import differences, load_simulation


def test_same_seed_same_cluster():
    a = simulate(SimConfig(nodes=128, hours=0.5, seed=11)).truth
    b = simulate(SimConfig(nodes=128, hours=0.5, seed=11)).truth
    assert a == b


def test_same_seed_same_store(tmp_path: Path):
    """Noise, restarts, lost rounds and clock skew are drawn from the seed too."""
    config = SimConfig(nodes=128, hours=0.25, seed=11)
    load_simulation(tmp_path / "a.duckdb", config)
    load_simulation(tmp_path / "b.duckdb", config)
    diff = differences(tmp_path / "a.duckdb", tmp_path / "b.duckdb")
    assert diff["metrics"][0] > 0
    assert {t: d for t, d in diff.items() if d[1] or d[2]} == {}


def test_other_seed_other_cluster():
    a = simulate(SimConfig(nodes=128, hours=0.5, seed=11)).truth
    b = simulate(SimConfig(nodes=128, hours=0.5, seed=12)).truth
    assert a["jobs"] != b["jobs"]


def test_topology_scales_with_nodes():
    sim = simulate(SimConfig(nodes=2048, hours=0.2, seed=1))
    topo = sim.topology
    assert len(topo.forwarders) == 4  # 512 compute nodes per forwarder
    assert len(topo.osts) == 3 * len(topo.oss)
    site = sim.site_batch()  # the site topology file it writes, through the real loader
    comps = site.components.to_pylist()
    kinds = {c["kind"] for c in comps}
    assert kinds == {"compute", "forwarder", "oss", "ost", "mdt", "mds", "switch", "login"}
    mdt = next(c for c in comps if c["kind"] == "mdt")
    assert mdt["parent"] == topo.mds  # the MDT is served by the MDS host, as OSTs by an OSS
    fwd = site.forwarding.to_pylist()
    assert len(fwd) == 2048 and {r["forwarder"] for r in fwd} == set(topo.forwarders)
    hosts = {h.name: h.role for h in sim.collection.hosts}
    assert hosts == {
        **dict.fromkeys(topo.oss, "oss"),
        topo.mds: "mds",
        **dict.fromkeys(topo.forwarders, "forwarder"),
    }
