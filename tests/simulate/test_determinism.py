from __future__ import annotations

from iolens.simulate import SimConfig, simulate


def test_same_seed_same_cluster():
    a = simulate(SimConfig(nodes=128, hours=0.5, seed=11)).truth
    b = simulate(SimConfig(nodes=128, hours=0.5, seed=11)).truth
    assert a == b


def test_other_seed_other_cluster():
    a = simulate(SimConfig(nodes=128, hours=0.5, seed=11)).truth
    b = simulate(SimConfig(nodes=128, hours=0.5, seed=12)).truth
    assert a["jobs"] != b["jobs"]


def test_topology_scales_with_nodes():
    sim = simulate(SimConfig(nodes=2048, hours=0.2, seed=1))
    topo = sim.topology
    assert len(topo.forwarders) == 4  # 512 compute nodes per forwarder
    assert len(topo.osts) == 3 * len(topo.oss)
    comps = topo.components_table().to_pylist()
    kinds = {c["kind"] for c in comps}
    assert kinds == {"compute", "forwarder", "oss", "ost", "mds", "switch", "login"}
    fwd = topo.forwarding_table().to_pylist()
    assert len(fwd) == 2048 and {r["forwarder"] for r in fwd} == set(topo.forwarders)
