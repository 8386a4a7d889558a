"""Restarts, lost rounds and skewed clocks do not break rates.

A cluster whose servers restart every few minutes, whose agents lose rounds and whose
clocks disagree by seconds: every sample still says exactly what happened in its own
interval. The OST and MDT totals in the store are checked against the simulator's own
per-round activity: a lost round's traffic is in the next sample (over twice the interval,
not at twice the rate), a restart loses what came before it in that interval and nothing
else, and no rate is ever negative or larger than the component can serve.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from iolens.simulate import SimConfig
from iolens.simulate.realism import Realism
from iolens.store import DuckDBStore
from tests.simulate.stores import load_simulation

STORMY = replace(Realism(), resets_per_day=100.0, missing_share=0.05, clock_skew_s=3.0)


@pytest.fixture(scope="module")
def stormy(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("disturbed") / "s.duckdb"
    sim = load_simulation(path, SimConfig(nodes=256, hours=1.0, seed=8, realism=STORMY))
    with DuckDBStore(path, create=False) as store:
        rows = store.query(
            "SELECT kind, component_id, epoch_us(ts) AS t, interval_s, read_bytes, write_bytes, "
            "md_ops FROM server_samples WHERE job_id IS NULL AND kind IN ('ost', 'mdt')"
        ).to_pylist()
        metrics = store.query(
            "SELECT kind, metric, value, interval_s FROM metrics WHERE interval_s IS NOT NULL"
        ).to_pylist()
    return sim, rows, metrics


def expected(sim, host: str, per_round: np.ndarray) -> dict[int, int]:
    """What the agent of `host` should report at each round it delivers: the activity since
    its previous delivered round, or since a restart in between (restarts happen before a
    round's activity is counted)."""
    d = sim.collection.disturbances
    out, prev = {}, None
    for k in range(sim.collection.rounds.count):
        if d.missing[host][k]:
            continue
        if prev is not None:
            first = prev + 1
            restarts = [r for r in d.resets[host] if prev < r <= k]
            if restarts:
                first = max(restarts)
            out[k] = int(per_round[first : k + 1].sum())
        prev = k
    return out


def round_of(sim, host: str, t_us: int) -> int:
    c = sim.collection
    k = (t_us / 1e6 - c.start - c.disturbances.skew[host]) / c.rounds.interval
    assert abs(k - round(k)) < 1e-6, "every stamp is the host's clock at a round"
    return round(k)


def test_the_run_was_disturbed(stormy):
    sim, _rows, _metrics = stormy
    d = sim.collection.disturbances
    assert sum(len(r) for r in d.resets.values()) >= 3
    assert sum(int(m.sum()) for m in d.missing.values()) >= 10
    assert min(abs(s) for s in d.skew.values()) > 0


def test_ost_totals_are_exactly_each_intervals_bytes(stormy):
    sim, rows, _metrics = stormy
    c, topo = sim.collection, sim.topology
    a = c.activity.ost
    checked = 0
    for i, ost in enumerate(topo.osts):
        host = topo.oss[int(topo.ost_oss[i])]
        mine = a.ost == i
        per_round = np.bincount(a.rnd[mine], a.nbytes[mine], minlength=c.rounds.count)
        want = expected(sim, host, per_round)
        for r in rows:
            if r["kind"] == "ost" and r["component_id"] == ost:
                k = round_of(sim, host, r["t"])
                assert r["read_bytes"] + r["write_bytes"] == want[k], (ost, k)
                checked += 1
    assert checked > 1000


def test_mdt_totals_are_exactly_each_intervals_operations(stormy):
    sim, rows, _metrics = stormy
    c, topo = sim.collection, sim.topology
    a = c.activity.mdt
    per_round = np.bincount(a.rnd, a.count, minlength=c.rounds.count)
    want = expected(sim, topo.mds, per_round)
    mdt = [r for r in rows if r["kind"] == "mdt"]
    assert mdt
    for r in mdt:
        assert r["md_ops"] == want[round_of(sim, topo.mds, r["t"])]


def test_lost_rounds_give_longer_intervals_not_higher_rates(stormy):
    sim, rows, _metrics = stormy
    interval = sim.collection.rounds.interval
    spans = {round(r["interval_s"] / interval, 6) for r in rows}
    assert 1.0 in spans and 2.0 in spans
    assert all(s == int(s) and s >= 1 for s in spans)


def test_no_rate_is_negative_or_beyond_capacity(stormy):
    sim, rows, metrics = stormy
    caps = sim.topology.caps
    for r in rows:
        assert r["interval_s"] > 0
        if r["kind"] == "ost":
            assert 0 <= (r["read_bytes"] + r["write_bytes"]) / r["interval_s"] <= caps.ost_bw
        else:
            assert 0 <= r["md_ops"] / r["interval_s"] <= caps.mds_ops * 1.01
    for m in metrics:
        if m["metric"].endswith(("_us", "_len", "_threads", "_s")):
            continue  # means: checked as positive below
        assert m["value"] >= 0, m
    means = [m for m in metrics if m["metric"] in ("service_us", "wait_us")]
    assert means and all(0 < m["value"] < 60e6 for m in means)
