"""The knobs accuracy sweeps turn: fault size, duration and kind, storm rate, noise, the
agent interval; and planted scenarios whose size comes from the seed."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from iolens.simulate import SimConfig, simulate
from iolens.simulate.realism import Realism


def minutes(fault: dict) -> float:
    span = datetime.fromisoformat(fault["end"]) - datetime.fromisoformat(fault["start"])
    return span.total_seconds() / 60


def test_fault_size_and_duration_are_what_was_asked():
    sim = simulate(
        SimConfig(
            nodes=512,
            hours=2.0,
            seed=3,
            ost_slow_factor=2.0,
            ost_slow_minutes=20,
            forwarder_slow_factor=1.5,
            forwarder_slow_minutes=5,
            storm_ops=25_000,
            storm_minutes=60,
        )
    )
    by = {f["kind"]: f for f in sim.truth["faults"]}
    assert (by["slow_ost"]["magnitude"], minutes(by["slow_ost"])) == (2.0, 20)
    assert by["slow_ost"]["factor"] == pytest.approx(0.5)  # capacity divided by the slowdown
    assert (by["slow_forwarder"]["magnitude"], minutes(by["slow_forwarder"])) == (1.5, 5)
    assert (by["metadata_storm"]["magnitude"], minutes(by["metadata_storm"])) == (25_000, 60)


def test_only_the_chosen_fault_kinds_are_injected_at_the_same_times():
    every = simulate(SimConfig(nodes=256, hours=1.0, seed=4)).truth["faults"]
    only = simulate(SimConfig(nodes=256, hours=1.0, seed=4, fault_kinds=("slow_ost",))).truth
    injected = [
        f for f in only["faults"] if f["kind"] in ("slow_ost", "slow_forwarder", "metadata_storm")
    ]
    assert [f["kind"] for f in injected] == ["slow_ost"]
    assert injected[0] == next(f for f in every if f["kind"] == "slow_ost")
    none = simulate(SimConfig(nodes=256, hours=1.0, seed=4, faults=False)).truth["faults"]
    assert not {f["kind"] for f in none} & {"slow_ost", "slow_forwarder", "metadata_storm"}


def test_planted_sizes_are_drawn_from_the_seed():
    sizes = set()
    for seed in range(6):
        t = simulate(SimConfig(nodes=1024, hours=0.3, seed=seed, faults=False)).truth
        p = t["planted"]
        assert 40 <= p["n1_culprit"]["nodes"] <= 384
        assert p["n1_culprit"]["nodes"] + p["n1_victim"]["nodes"] <= 512  # one forwarder
        assert 224 <= p["thrasher"]["nodes"] <= 448
        assert t["jobs"][p["n1_culprit"]["job_id"]]["nnodes"] == p["n1_culprit"]["nodes"]
        sizes.add((p["n1_culprit"]["nodes"], p["thrasher"]["nodes"]))
    assert len(sizes) == 6


def test_noise_scale_scales_the_service_time_noise():
    def spread(scale: float) -> float:
        sim = simulate(SimConfig(nodes=256, hours=1.0, seed=2, noise_scale=scale, faults=False))
        return float(np.std(np.log(sim.collection.model.osts.noise)))

    assert spread(0.0) == 0.0
    base = Realism().service_sigma
    assert spread(1.0) == pytest.approx(base, rel=0.25)
    assert spread(2.0) == pytest.approx(2 * base, rel=0.25)


def test_the_agent_interval_sets_the_rounds():
    sim = simulate(
        SimConfig(nodes=128, hours=0.25, seed=1, agent_interval_s=30, realism=Realism.quiet())
    )
    rounds = sim.collection.rounds
    assert rounds.interval == 30
    assert (rounds.count - 1) * 30 >= sim.result.end > (rounds.count - 2) * 30
    batches = [b for _name, b in sim.batches() if b.key and b.key.startswith("agent:")]
    host = sim.topology.oss[0]
    stamps = [int(b.key.rsplit(":", 1)[1]) for b in batches if b.source == f"agent:{host}"]
    assert set(np.diff(stamps)) == {30_000_000}


@pytest.mark.parametrize(
    "bad",
    [
        {"collect": "carrier-pigeon"},
        {"fault_kinds": ("slow_disk",)},
        {"ost_slow_factor": 0.5},
        {"noise_scale": -1.0},
        {"forwarder_export": "smoke-signals"},
        {"agent_interval_s": 0.1},
    ],
)
def test_nonsense_is_refused_with_a_reason(bad):
    with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
        SimConfig(**bad)
