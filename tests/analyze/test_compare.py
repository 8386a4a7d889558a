"""Configuration comparison: the K computer's mean-rank arithmetic (a golden test from the
paper's Tables 6.1 and 6.2), and ranking real runs of one application from a store."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from iolens.analyze import compare as cmp
from iolens.analyze.pipeline import analyze_jobs
from iolens.errors import InputError, NotFound
from iolens.ingest.load import load
from iolens.simulate.engine import Engine, Fault
from iolens.simulate.run import SimConfig, Simulation
from iolens.simulate.topology import Topology
from iolens.simulate.workload import APP_BY_NAME, JobFactory
from iolens.store import DuckDBStore

METRICS = ("req_qdepth", "req_waittime", "req_active", "r_bw", "t_wait", "ost_mean")

# Tsujita et al., K computer holistic log analysis, Table 6.1 (IOR): ranks per metric
# (req_qdepth, req_waittime, req_active, R_BW, T_wait^max, OST_mean) and overall score.
TABLE_6_1 = {
    "T:original": ((7, 7, 1, 7, 2, 5), 4.83),
    "T:agg=0,rr=0,req=0": ((5, 4, 4, 6, 7, 1), 4.50),
    "T:agg=0,rr=0,req=4": ((1, 1, 8, 4, 8, 7), 4.83),
    "T:agg=1,rr=0,req=4": ((2, 2, 5, 2, 5, 6), 3.67),
    "T:agg=1,rr=1,req=4": ((3, 3, 3, 1, 6, 4), 3.33),
    "T:agg=1,rr=1,req=16": ((6, 5, 2, 3, 4, 2), 3.67),
    "N:original": ((8, 8, 6, 8, 1, 8), 6.50),
    "N:agg=0,rr=0,req=4": ((4, 6, 7, 5, 3, 3), 4.67),
}
# Table 6.2 (HPIO).
TABLE_6_2 = {
    "T:original": ((5, 6, 2, 5, 1, 5), 4.00),
    "T:agg=0,rr=0,req=0": ((4, 5, 4, 4, 2, 6), 4.17),
    "T:agg=0,rr=0,req=8": ((1, 1, 6, 2, 6, 1), 2.83),
    "T:agg=1,rr=1,req=8": ((3, 4, 1, 1, 4, 3), 2.67),
    "T:agg=1,rr=1,req=2": ((2, 2, 5, 3, 3, 4), 3.17),
    "T:agg=1,rr=1,req=4": ((6, 3, 3, 6, 5, 2), 4.17),
}


def _values_from_ranks(table: dict) -> dict[str, dict[str, float]]:
    """Metric values consistent with the paper's ranks: lower-is-better metrics grow with
    the rank, higher-is-better ones shrink (the paper prints ranks, not the raw means)."""
    out: dict[str, dict[str, float]] = {}
    for config, (ranks, _score) in table.items():
        out[config] = {}
        for m, r in zip(METRICS, ranks, strict=True):
            base = {"req_qdepth": 600.0, "req_waittime": 800.0, "req_active": 4.0}.get(m, 1.0)
            step = base * 0.37 * r
            out[config][m] = base + step if cmp.DIRECTIONS[m] == cmp.LOWER else base * 10 - step
    return out


ORDER_6_1 = [
    "T:agg=1,rr=1,req=4",  # 3.33, the paper's best IOR configuration
    "T:agg=1,rr=0,req=4",  # 3.67, tied with the next: the table's order decides
    "T:agg=1,rr=1,req=16",
    "T:agg=0,rr=0,req=0",
    "N:agg=0,rr=0,req=4",
    "T:original",  # 4.83, tied with the next
    "T:agg=0,rr=0,req=4",
    "N:original",  # 6.50
]
ORDER_6_2 = [
    "T:agg=1,rr=1,req=8",  # 2.67, the paper's best HPIO configuration
    "T:agg=0,rr=0,req=8",
    "T:agg=1,rr=1,req=2",
    "T:original",
    "T:agg=0,rr=0,req=0",  # 4.17, tied with the next
    "T:agg=1,rr=1,req=4",
]


@pytest.mark.parametrize(
    ("table", "order"),
    [(TABLE_6_1, ORDER_6_1), (TABLE_6_2, ORDER_6_2)],
    ids=["table-6.1-IOR", "table-6.2-HPIO"],
)
def test_golden_k_computer_tables(table, order):
    # the paper's ranks -> the paper's overall scores, to the two decimals it prints
    ranks = {c: dict(zip(METRICS, r, strict=True)) for c, (r, _) in table.items()}
    scores = cmp.scores_of(ranks)
    assert {c: round(s, 2) for c, s in scores.items()} == {c: s for c, (_, s) in table.items()}
    # values ranked in each metric's direction reproduce the paper's ranks exactly
    got = cmp.mean_rank(_values_from_ranks(table), cmp.DIRECTIONS)
    assert got.metrics == list(METRICS) and got.skipped == {}
    assert got.ranks == {
        c: {m: float(r) for m, r in zip(METRICS, rs, strict=True)} for c, (rs, _) in table.items()
    }
    assert {c: round(s, 2) for c, s in got.scores.items()} == {c: s for c, (_, s) in table.items()}
    assert got.runs == order


def test_table_6_1_exact_fractions():
    ranks = {c: dict(zip(METRICS, r, strict=True)) for c, (r, _) in TABLE_6_1.items()}
    scores = cmp.scores_of(ranks)
    assert scores["T:agg=1,rr=1,req=4"] == 20 / 6
    assert scores["N:original"] == 6.5
    assert scores["T:original"] == scores["T:agg=0,rr=0,req=4"] == 29 / 6


def test_rank_values_directions_and_ties():
    assert cmp.rank_values([3.0, 1.0, 2.0], cmp.LOWER) == [3.0, 1.0, 2.0]
    assert cmp.rank_values([3.0, 1.0, 2.0], cmp.HIGHER) == [1.0, 3.0, 2.0]
    assert cmp.rank_values([5.0, 7.0, 7.0, 9.0], cmp.LOWER) == [1.0, 2.5, 2.5, 4.0]
    assert cmp.rank_values([2.0, 2.0, 2.0], cmp.HIGHER) == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="direction"):
        cmp.rank_values([1.0], "sideways")


def test_a_metric_missing_for_one_run_is_skipped():
    t = cmp.mean_rank(
        {"a": {"x": 1.0, "y": 5.0}, "b": {"x": 2.0, "y": None}},
        {"x": cmp.LOWER, "y": cmp.HIGHER},
    )
    assert t.metrics == ["x"] and t.skipped == {"y": "no value for b"}
    assert t.runs == ["a", "b"] and t.scores == {"a": 1.0, "b": 2.0}


# -- on stored runs --------------------------------------------------------------------------

RUNS = ("200001", "200002", "200003")


@pytest.fixture(scope="module")
def three_runs_db(tmp_path_factory):
    """Three runs of one application, alone on a small simulated cluster; during the third
    every OST is failing slow (a fifth of its bandwidth), so that run is deliberately worse."""
    topo = Topology.build(128)
    factory = JobFactory(np.random.default_rng(5))
    jobs = []
    for i, submit in enumerate((0, 2400, 4800)):
        job = factory.make(RUNS[i], APP_BY_NAME["lammps"], 32, submit)
        job.first_node, job.state = 0, "COMPLETED"
        jobs.append(job)
    faults = [Fault("slow_ost", ost, 4800, 4 * 3600, 0.2) for ost in topo.osts]
    result = Engine(topo, faults, np.random.default_rng(6)).run(jobs, 2 * 3600)
    assert [r.start for r in result.jobs] == [0, 2400, 4800]
    assert all(r.end < 4800 for r in result.jobs[:2])  # the healthy runs end before the fault
    sim = Simulation(SimConfig(nodes=128, hours=2.0, seed=5), topo, jobs, result)
    path = tmp_path_factory.mktemp("compare") / "runs.duckdb"
    with DuckDBStore(path) as store:
        for _name, batch in sim.batches():
            load(store, batch)
        analyze_jobs(store)
    return path


def test_the_deliberately_worse_run_ranks_last(three_runs_db):
    with DuckDBStore(three_runs_db, create=False) as store:
        data = cmp.compare(store, list(RUNS))
        assert cmp.jobs_with_tag(store, "lammps") == list(RUNS)
    assert data["worst"] == "200003" and [r["job_id"] for r in data["runs"]][-1] == "200003"
    assert data["best"] in ("200001", "200002") and data["apps"] == ["lammps"]
    assert [r["position"] for r in data["runs"]] == [1, 2, 3]
    scores = [r["score"] for r in data["runs"]]
    assert scores == sorted(scores) and scores[-1] > scores[-2]
    worse = data["runs"][-1]
    healthy = data["runs"][:2]
    # each metric in its direction: deeper queues and longer waits rank the slow run last,
    # and so does its lower OST bandwidth
    assert worse["ranks"]["req_qdepth"] == worse["ranks"]["req_waittime"] == 3.0
    assert worse["ranks"]["ost_mean"] == 3.0
    assert all(worse["metrics"]["ost_mean"] < h["metrics"]["ost_mean"] for h in healthy)
    assert all(worse["metrics"]["req_waittime"] > h["metrics"]["req_waittime"] for h in healthy)
    by_name = {m["name"]: m for m in data["metrics"]}
    assert all(by_name[m]["ranked"] for m in METRICS)
    # the OSS figures are the ost_io service's; the links are the InfiniBand ports the
    # forwarders' and OSSes' agents report (the `infiniband` source), waits in ticks
    assert by_name["req_qdepth"]["source"] == "oss"
    assert by_name["r_bw"]["source"] == by_name["t_wait"]["source"] == "ib_port"
    assert by_name["t_wait"]["unit"] == "ticks"
    assert by_name["ost_mean"]["source"] == "ost_jobstats"
    # at a fifth of the OSTs' bandwidth the slow run's links carry less at their peak
    assert worse["ranks"]["r_bw"] == 3.0
    assert by_name["req_active"]["better"] == "higher" and by_name["t_wait"]["better"] == "lower"
    for r in data["runs"]:
        assert sorted(r["ranks"]) == sorted(METRICS)
        assert r["score"] == pytest.approx(sum(r["ranks"].values()) / 6)


def _copy(db: Path, dst: Path) -> Path:
    shutil.copyfile(db, dst)
    if Path(f"{db}.wal").exists():
        shutil.copyfile(f"{db}.wal", f"{dst}.wal")
    return dst


def test_without_port_counters_the_links_are_the_forwarders(three_runs_db, tmp_path):
    """A site whose agents report no HCAs: the links are the job's forwarders, their
    client-facing bytes against the topology's peak and the daemon's request wait; each
    piece that is missing skips its metric and says which."""
    path = _copy(three_runs_db, tmp_path / "noib.duckdb")
    with DuckDBStore(path, create=False) as store:
        store.execute("DELETE FROM metrics WHERE kind = 'ib_port'")
        data = cmp.compare(store, list(RUNS))
        by_name = {m["name"]: m for m in data["metrics"]}
        assert by_name["r_bw"]["source"] == by_name["t_wait"]["source"] == "forwarder"
        assert by_name["r_bw"]["ranked"] and by_name["t_wait"]["unit"] == "us"
        assert data["worst"] == "200003" and data["runs"][-1]["ranks"]["r_bw"] == 3.0
        # no peak bandwidth for the forwarders (no site topology): R_BW cannot be had
        store.execute("UPDATE components SET peak_bw = NULL WHERE kind = 'forwarder'")
        # an LNet router's export: no request wait
        store.execute("UPDATE server_samples SET wait_us = NULL WHERE kind = 'forwarder'")
        data = cmp.compare(store, list(RUNS))
    by_name = {m["name"]: m for m in data["metrics"]}
    assert not by_name["r_bw"]["ranked"] and not by_name["t_wait"]["ranked"]
    assert "peak bandwidth of its forwarders" in by_name["r_bw"]["skipped"]
    assert "export no request wait" in by_name["t_wait"]["skipped"]
    assert all(r in by_name["t_wait"]["skipped"] for r in RUNS)
    assert data["worst"] == "200003"  # the other four metrics still rank it last


def test_compare_errors(three_runs_db):
    with DuckDBStore(three_runs_db, create=False) as store:
        with pytest.raises(InputError, match="at least two"):
            cmp.compare(store, ["200001", "200001"])
        with pytest.raises(NotFound, match="job 999"):
            cmp.compare(store, ["200001", "999"])


def test_compare_on_the_session_simulation(sim_db):
    """Runs of one application from the acceptance simulation: every job gets a rank on
    every metric the store supports, and the ranks are a permutation per metric."""
    with sim_db.store() as store:
        apps = store.query(
            "SELECT app, list(job_id ORDER BY job_id) AS ids FROM jobs GROUP BY app "
            "HAVING count(*) >= 3 ORDER BY count(*) DESC, app LIMIT 1"
        ).to_pylist()
        ids = apps[0]["ids"][:4]
        data = cmp.compare(store, ids)
    assert sorted(r["job_id"] for r in data["runs"]) == sorted(ids)
    n = len(ids)
    ranked = [m["name"] for m in data["metrics"] if m["ranked"]]
    assert {"req_qdepth", "req_waittime", "req_active", "ost_mean"} <= set(ranked)
    for m in ranked:
        assert sum(r["ranks"][m] for r in data["runs"]) == pytest.approx(n * (n + 1) / 2)


def test_links_from_infiniband_ports(tmp_path):
    """With port counters, R_BW and T_wait come from the job's InfiniBand ports."""
    from datetime import datetime, timedelta

    import pyarrow as pa

    from iolens.model.batch import Batch
    from iolens.model.schema import COMPONENTS, JOBS, METRICS, SERVER_SAMPLES

    t0 = datetime(2025, 1, 1, 8)
    jobs = pa.Table.from_pylist(
        [
            {
                "job_id": j,
                "user": "u",
                "app": "ior",
                "nodes": [f"cn{j}"],
                "nprocs": 4,
                "start": t0 + timedelta(hours=h),
                "end": t0 + timedelta(hours=h, seconds=60),
                "state": "COMPLETED",
                "source": "test",
            }
            for j, h in (("1", 0), ("2", 1))
        ],
        schema=JOBS,
    )
    samples, metrics = [], []
    for j, h, qlen, rate, wait in (("1", 0, 2.0, 4e9, 100.0), ("2", 1, 9.0, 1e9, 900.0)):
        for s in range(1, 61):
            ts = t0 + timedelta(hours=h, seconds=s)
            samples.append(
                {
                    "ts": ts,
                    "interval_s": 1.0,
                    "kind": "ost",
                    "component_id": "OST0000",
                    "job_id": j,
                    "read_bytes": 0,
                    "write_bytes": int(rate / 4),
                }
            )
            samples.append(  # ost/OSS/ost_io/stats of the OST's server, as lustre_oss reads it
                {
                    "ts": ts,
                    "interval_s": 1.0,
                    "kind": "oss",
                    "component_id": "oss01",
                    "job_id": None,
                    "queue_len": qlen,
                    "wait_us": 10 * qlen,
                    "active_threads": 4.0,
                }
            )
            for metric, value in (
                ("tx_bytes", rate),
                ("rx_bytes", rate / 2),
                ("rate_gbps", 100.0),
                ("port_xmit_wait", wait),
            ):
                metrics.append(
                    {
                        "ts": ts,
                        "interval_s": 1.0,
                        "kind": "ib_port",
                        "component_id": f"cn{j}:mlx5_0:1",
                        "job_id": None,
                        "metric": metric,
                        "value": value,
                    }
                )
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(
            store,
            Batch(
                "test",
                jobs=jobs,
                server_samples=pa.Table.from_pylist(samples, schema=SERVER_SAMPLES),
                metrics=pa.Table.from_pylist(metrics, schema=METRICS),
            ),
        )
        # which server the OST is on is what the OSS's agent reports; until then the OSS
        # statistics cannot be tied to the jobs (Lustre keeps no request queue per OST)
        unplaced = cmp.compare(store, ["2", "1"])
        served = [{"component_id": "OST0000", "kind": "ost", "parent": "oss01"}]
        load(store, Batch("agent", components=pa.Table.from_pylist(served, schema=COMPONENTS)))
        data = cmp.compare(store, ["2", "1"])
    why = {m["name"]: m["skipped"] for m in unplaced["metrics"]}
    assert all("no ost_io service statistics" in why[m] for m in ("req_qdepth", "req_waittime"))
    assert unplaced["runs"][0]["metrics"]["req_qdepth"] is None
    by_name = {m["name"]: m for m in data["metrics"]}
    assert by_name["r_bw"]["source"] == by_name["t_wait"]["source"] == "ib_port"
    assert by_name["t_wait"]["unit"] == "ticks"
    assert by_name["req_qdepth"]["source"] == "oss" and by_name["req_qdepth"]["ranked"]
    first, second = data["runs"]
    assert (first["job_id"], second["job_id"]) == ("1", "2")
    assert first["metrics"]["req_qdepth"] == pytest.approx(2.0)
    assert first["metrics"]["r_bw"] == pytest.approx(4e9 / 12.5e9)
    assert first["metrics"]["t_wait"] == pytest.approx(100.0)
    # req_active ties (4 threads each): both share rank 1.5
    assert first["ranks"]["req_active"] == second["ranks"]["req_active"] == 1.5
    assert first["score"] == pytest.approx((1 + 1 + 1.5 + 1 + 1 + 1) / 6)
