"""System views on the seeded simulation (checked against independent SQL and the injected
faults) and on small hand-made stores whose answers are known."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from iolens.analyze.system import (
    hourly_load,
    imbalance,
    interconnect,
    level_of,
    mds_load,
    oss_requests,
    ost_heatmap,
    switch_traffic,
    to_plain,
)
from iolens.analyze.system.summary import load_summary
from iolens.errors import NotFound
from iolens.model.ids import JobIdScheme
from iolens.model.schema import COMPONENTS, METRICS, SERVER_SAMPLES
from iolens.present.cli.render import to_json
from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore

KINDS = ("forwarder", "ost", "mds")


def _t(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", ""))


@pytest.fixture(scope="module")
def sim(sim_db):
    with sim_db.store() as store:
        yield store, sim_db.truth


# -- load levels ----------------------------------------------------------------------------
LEVEL_CASES = [(1.5, "high"), (0.91, "high"), (0.9, "mid"), (0.5, "mid"), (0.49, "low")]
LEVEL_CASES += [(0.1, "low"), (0.099, "idle"), (0.0, "idle")]


@pytest.mark.parametrize("load,level", LEVEL_CASES)
def test_level_boundaries_follow_beacon(load, level):
    assert level_of(load) == level


@pytest.mark.parametrize("kind", KINDS)
def test_shares_sum_to_one_and_cells_cover_every_component_hour(sim, kind):
    store, _ = sim
    load = hourly_load(store, kind)
    assert load.cells, kind
    assert sum(load.shares.values()) == pytest.approx(1.0)
    assert sum(load.counts.values()) == len(load.cells)
    # The MDS's metadata operations are its MDTs' md_stats (kind `mdt`); kind `mds` rows are
    # the host's request queue, with no operations, and make no cell.
    sample_kind = "mdt" if kind == "mds" else kind
    cells = store.query(
        "SELECT count(*) AS n FROM (SELECT DISTINCT component_id, "
        "date_trunc('hour', ts - INTERVAL '1 microsecond') FROM server_samples "
        "WHERE job_id IS NULL AND kind = ?)",
        [sample_kind],
    ).to_pylist()[0]["n"]
    assert len(load.cells) == cells
    assert {c.component_id for c in load.cells} == set(
        store.query("SELECT component_id FROM components WHERE kind = ?", [sample_kind])
        .column("component_id")
        .to_pylist()
    )
    for c in load.cells:
        assert c.level == level_of(c.load)
    for comp in load.components:
        assert sum(comp.hours.values()) <= len(load.hours)
        assert comp.capacity_source == "benchmark"  # the simulator benchmarks all three


def test_forwarder_peak_equals_an_independent_max(sim):
    store, _ = sim
    raw = hourly_load(store, "forwarder", resolution_s=0)
    expect = {
        r["component_id"]: r["m"]
        for r in store.query(
            "SELECT component_id, max((read_bytes + write_bytes) / interval_s) AS m "
            "FROM server_samples WHERE kind = 'forwarder' AND job_id IS NULL GROUP BY ALL"
        ).to_pylist()
    }
    assert {c.component_id: c.peak for c in raw.components} == pytest.approx(expect)
    # The default peak is of one-minute means: recompute them in Python from the raw rows.
    rows = store.query(
        "SELECT component_id, epoch_us(ts) AS us, read_bytes + write_bytes AS b, interval_s "
        "FROM server_samples WHERE kind = 'forwarder' AND job_id IS NULL"
    ).to_pylist()
    sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        acc = sums[(r["component_id"], (r["us"] - 1) // 60_000_000)]
        acc[0] += r["b"]
        acc[1] += r["interval_s"]
    minute = defaultdict(float)
    for (cid, _m), (b, secs) in sums.items():
        minute[cid] = max(minute[cid], b / secs)
    smooth = hourly_load(store, "forwarder")
    assert {c.component_id: c.peak for c in smooth.components} == pytest.approx(dict(minute))
    for c in smooth.components:
        assert c.peak_load == pytest.approx(c.peak / 2.5e9)
        assert c.peak <= expect[c.component_id]


def test_window_keeps_only_its_hours(sim):
    store, _ = sim
    full = hourly_load(store, "ost")
    first = full.hours[0]
    one = hourly_load(store, "ost", first, first + timedelta(hours=1))
    assert one.hours == [first]
    assert {(c.component_id, c.peak) for c in one.cells} == {
        (c.component_id, c.peak) for c in full.cells if c.hour == first
    }


def _samples(rows: list[dict]) -> pa.Table:
    base = {n: None for n in SERVER_SAMPLES.names}
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=SERVER_SAMPLES)


def test_imbalance_finds_an_idle_forwarder_next_to_a_saturated_one(tmp_path):
    t0 = datetime(2025, 1, 1, 10, 0, 0)
    rows = []
    # hour 10: fa at 95 % of 1 GB/s, fb at 5 %; hour 11: both at 60 %.
    for minute in range(60):
        ts = t0 + timedelta(minutes=minute + 1)
        for cid, bw in (("fa", 0.95e9), ("fb", 0.05e9)):
            rows.append(
                dict(
                    ts=ts,
                    interval_s=60.0,
                    kind="forwarder",
                    component_id=cid,
                    read_bytes=int(bw * 60),
                    write_bytes=0,
                )
            )
        for cid in ("fa", "fb"):
            rows.append(
                dict(
                    ts=ts + timedelta(hours=1),
                    interval_s=60.0,
                    kind="forwarder",
                    component_id=cid,
                    read_bytes=0,
                    write_bytes=int(0.6e9 * 60),
                )
            )
    comps = pa.Table.from_pylist(
        [{"component_id": "fa", "kind": "forwarder", "peak_bw": 1e9},
         {"component_id": "fb", "kind": "forwarder", "peak_bw": None}],
        schema=COMPONENTS,
    )  # fmt: skip
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        store.append("components", comps)
        store.append("server_samples", _samples(rows))
        load = hourly_load(store, "forwarder")
        imb = imbalance(load)
    cells = {(c.component_id, c.hour.hour): c for c in load.cells}
    assert cells[("fa", 10)].level == "high" and cells[("fb", 10)].level == "idle"
    assert cells[("fa", 11)].level == "mid"
    # fb has no benchmark: it is measured against the kind's highest rate (fa's 0.95 GB/s).
    fb = next(c for c in load.components if c.component_id == "fb")
    assert fb.capacity_source == "observed" and fb.capacity == pytest.approx(0.95e9)
    assert cells[("fb", 11)].load == pytest.approx(0.6 / 0.95)
    assert (imb.hours, imb.idle_next_to_saturated, imb.share) == (2, 1, 0.5)
    assert imb.by_hour[0].high == ["fa"] and imb.by_hour[0].idle == ["fb"]
    assert load.shares == {"high": 0.25, "mid": 0.5, "low": 0.0, "idle": 0.25}


def test_lnet_routers_are_loaded_by_the_bytes_they_route(tmp_path):
    """An LNet router counts routed bytes, not reads and writes (`lnet_router`): its load
    is `route_bytes`; a forwarder whose daemon counts reads and writes keeps those."""
    t0 = datetime(2025, 1, 1, 10, 0, 0)
    samples, metrics = [], []
    for i in range(12):  # two minutes of 10 s samples
        ts = t0 + timedelta(seconds=10 * (i + 1))
        bw = 2e9 if i < 6 else 1e9  # r1 routes 2 GB/s in the first minute, 1 GB/s after
        metrics.append((ts, "r1", "route_bytes", bw))
        metrics.append((ts, "r1", "queue_len", 3.0))
        metrics.append((ts, "f2", "route_bytes", 5e9))  # a daemon node that also routes
        samples.append(
            dict(ts=ts, interval_s=10.0, kind="forwarder", component_id="f2",
                 read_bytes=int(0.5e9 * 10), write_bytes=0)
        )  # fmt: skip
        samples.append(dict(ts=ts, interval_s=10.0, kind="forwarder", component_id="r1"))
    table = pa.Table.from_pylist(
        [{"ts": ts, "interval_s": 10.0, "kind": "forwarder", "component_id": c, "job_id": None,
          "metric": m, "value": v} for ts, c, m, v in metrics],
        schema=METRICS,
    )  # fmt: skip
    with DuckDBStore(tmp_path / "r.duckdb") as store:
        empty = hourly_load(store, "forwarder")
        store.append("metrics", table)
        store.append("server_samples", _samples(samples))
        load = hourly_load(store, "forwarder")
        ost = hourly_load(store, "ost")
    assert empty.cells == [] and "route_bytes" in empty.missing and "iofwd" in empty.missing
    comps = {c.component_id: c for c in load.components}
    assert (comps["r1"].basis, comps["r1"].peak) == ("route_bytes", pytest.approx(2e9))
    assert (comps["f2"].basis, comps["f2"].peak) == ("read_bytes + write_bytes", 0.5e9)
    assert load.missing is None
    assert ost.cells == [] and "obdfilter/<ost>/stats" in ost.missing


def test_the_simulated_lnet_routers_have_load_cells():
    """The simulator's LNet routers, through the real `lnet_router` source: one cell per
    router and hour, each the highest one-minute mean of its routed bytes."""
    sim = simulate(SimConfig(nodes=512, hours=0.5, seed=7, forwarder_export="lnet"))
    with DuckDBStore(":memory:") as store:
        sim.load(store)
        load = hourly_load(store, "forwarder")
        rows = store.query(
            "SELECT component_id, max(b / s) AS peak FROM (SELECT component_id, "
            "(epoch_us(ts) - 1) // 60000000 AS m, sum(value * interval_s) AS b, "
            "sum(interval_s) AS s FROM metrics WHERE kind = 'forwarder' "
            "AND metric = 'route_bytes' GROUP BY ALL) GROUP BY ALL"
        ).to_pylist()
    assert rows and {c.basis for c in load.components} == {"route_bytes"}
    assert {c.component_id: c.peak for c in load.components} == pytest.approx(
        {r["component_id"]: r["peak"] for r in rows}
    )


# -- MDS -----------------------------------------------------------------------------------
def test_mds_split_adds_up_and_the_storm_is_not_jobs(sim):
    store, truth = sim
    (storm,) = [f for f in truth["faults"] if f["kind"] == "metadata_storm"]
    s0, s1 = _t(storm["start"]), _t(storm["end"])
    total = store.query(
        "SELECT sum(md_ops) AS n FROM server_samples WHERE kind = 'mdt' AND job_id IS NULL"
    ).to_pylist()[0]["n"]
    per_id = store.query(
        "SELECT job_id, sum(md_ops) AS n FROM server_samples "
        "WHERE kind = 'mdt' AND job_id IS NOT NULL GROUP BY job_id"
    ).to_pylist()
    jobs = sum(r["n"] for r in per_id if JobIdScheme().classify(r["job_id"]).is_job)
    hourly = mds_load(store)
    assert hourly.total_ops == total and hourly.job_ops == jobs
    assert hourly.job_ops + hourly.other_ops == hourly.total_ops
    assert hourly.capacity == 40_000 and hourly.capacity_source == "benchmark"
    for b in hourly.bins:
        assert b.job_ops + b.other_ops == b.total_ops
    storm_hour = next(b for b in hourly.bins if b.start <= s0 < b.start + timedelta(hours=1))
    assert storm_hour.other_share > 0.9  # login01's storm dwarfs the jobs' metadata
    fine = mds_load(store, bin_s=600)
    assert sum(b.total_ops for b in fine.bins) == total
    # The only client outside jobs is the login node: `ls` and `cp` always, the storm for
    # its span (truth). So in every bin `other` (md_stats minus the jobs' job_stats) is what
    # the MDT's exports/<nid>/stats counted for the storm's client, file against file.
    login = {
        r["bin"]: int(r["n"])
        for r in store.query(
            "SELECT make_timestamp((epoch_us(ts) - 1) // 600000000 * 600000000) AS bin, "
            "sum(md_ops) AS n FROM server_samples WHERE kind = 'mdt_client' "
            "AND job_id IS NULL AND component_id = 'lustre-MDT0000:' || ? GROUP BY ALL",
            [storm["client_nid"]],
        ).to_pylist()
    }
    inside, outside = [], []
    for b in fine.bins:
        assert b.other_ops == login.get(b.start, 0), b
        end = b.start + timedelta(seconds=600)
        if end <= s0 or b.start >= s1:  # no storm: the login node's processes are tagged
            assert b.unattributed_ops == 0 and b.other_ops == b.untagged_ops, b
            outside.append(b)
        elif s0 <= b.start and end <= s1:
            assert b.other_share > 0.95, b
            assert b.peak_load > 0.9
            inside.append(b)
    assert inside and outside
    assert max(b.other_ops for b in outside) < 0.01 * min(b.other_ops for b in inside)
    # Who: the storm's client tops the exports; its jobstats id (when the truth says it had
    # one) the untagged processes, else its operations are in no entry.
    assert fine.top_clients[0]["nid"] == storm["client_nid"]
    if storm["job_stats_id"] is not None:
        assert fine.top_untagged[0]["job_id"] == storm["job_stats_id"]
        assert fine.top_untagged[0]["share"] > 0.9
    else:
        assert all(b.unattributed_ops > 0.9 * b.other_ops for b in inside)
    assert fine.time_above_75 is not None and fine.time_above_75 > 0
    assert sum(fine.load_levels.values()) == pytest.approx(1.0)
    assert hourly.top_jobs and hourly.top_jobs[0]["ops"] >= hourly.top_jobs[-1]["ops"]


# -- network -------------------------------------------------------------------------------
def test_switch_view_says_the_simulated_switches_are_unmonitored(sim):
    """No agent source reads a switch; the view counts the port traffic of the hosts under
    each switch, and the simulator runs no agent on compute nodes: nothing to show, and
    the view says what is missing rather than drawing four idle switches."""
    store, _ = sim
    view = switch_traffic(store)
    switches = (
        store.query("SELECT component_id FROM components WHERE kind = 'switch' ORDER BY 1")
        .column("component_id")
        .to_pylist()
    )
    hosts = store.query(
        "SELECT count(*) AS n FROM components WHERE parent IN (SELECT component_id "
        "FROM components WHERE kind = 'switch')"
    ).to_pylist()[0]["n"]
    assert len(switches) == 4 and hosts == 1024
    assert view.switches == [] and view.histogram == [] and view.total_bytes == 0
    assert view.unmonitored == switches
    assert "InfiniBand port counters" in view.missing
    assert f"{hosts} hosts behind the {len(switches)} switches" in view.missing


def _ports(rows: list[tuple[str, int, float, float, float]]) -> pa.Table:
    """(port, seconds after T0, interval, tx rate, rx rate) -> ib_port metric rows."""
    t0 = datetime(2025, 1, 1, 0, 0, 0)
    out = []
    for port, t, iv, tx, rx in rows:
        for metric, value in (("tx_bytes", tx), ("rx_bytes", rx)):
            out.append(
                {"ts": t0 + timedelta(seconds=t), "interval_s": iv, "kind": "ib_port",
                 "component_id": port, "job_id": None, "metric": metric, "value": value}
            )  # fmt: skip
    return pa.Table.from_pylist(out, schema=METRICS)


def test_switch_histogram_and_imbalance_from_host_ports(tmp_path):
    # Host -> leaf switch, and each port's tx/rx rates (bytes/s) over two minutes of 10 s
    # samples. cn2 lost one round (a 20 s sample); srv1 hangs under no switch; cn5's switch
    # has no reporting host.
    parent = {"cn1": "swA", "cn2": "swA", "cn3": "swB", "cn4": "swC", "cn5": "swD"}
    rates = {
        "cn1:mlx5_0:1": (1.0e9, 0.5e9),
        "cn1:mlx5_1:1": (0.1e9, 0.1e9),  # a second port counts too
        "cn2:mlx5_0:1": (0.2e9, 0.2e9),
        "cn3:mlx5_0:1": (0.1e9, 0.1e9),
        "cn4:mlx5_0:1": (2.0e9, 2.0e9),
        "srv1:mlx5_0:1": (9.0e9, 9.0e9),
    }
    rows = []
    for port, (tx, rx) in rates.items():
        for t in range(10, 121, 10):
            if port.startswith("cn2") and t == 30:
                continue  # lost: the 40 s sample covers 20 s
            iv = 20.0 if port.startswith("cn2") and t == 40 else 10.0
            rows.append((port, t, iv, tx, rx))
    comps = [{"component_id": s, "kind": "switch", "peak_bw": None} for s in ["swA", "swB", "swD"]]
    comps.append({"component_id": "swC", "kind": "switch", "peak_bw": 8e9})
    comps += [{"component_id": h, "kind": "compute", "parent": p} for h, p in parent.items()]
    comps.append({"component_id": "srv1", "kind": "oss"})
    with DuckDBStore(tmp_path / "sw.duckdb") as store:
        assert "no switch topology" in switch_traffic(store).missing
        store.append("metrics", _ports(rows))
        store.append(
            "components",
            pa.Table.from_pylist(
                [{"parent": None, "peak_bw": None, "peak_ops": None, **c} for c in comps],
                schema=COMPONENTS,
            ),
        )
        view = switch_traffic(store)
        first_minute = switch_traffic(store, end=datetime(2025, 1, 1, 0, 1))
    # Expected volumes, summed independently: bytes = rate x interval per sample.
    expect: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for port, _t, iv, tx, rx in rows:
        sw = parent.get(port.split(":")[0])
        if sw:
            expect[sw][0] += tx * iv
            expect[sw][1] += rx * iv
    got = {s.component_id: (s.tx_bytes, s.rx_bytes) for s in view.switches}
    assert got == {sw: (round(tx), round(rx)) for sw, (tx, rx) in expect.items()}
    assert [s.component_id for s in view.switches] == ["swC", "swA", "swB"]  # busiest first
    assert view.unmonitored == ["swD"] and view.missing is None
    a = next(s for s in view.switches if s.component_id == "swA")
    assert (a.hosts, a.hosts_reporting) == (2, 2)
    # The lost round does not dilute cn2's minute: swA peaks at its ports' summed rates.
    assert a.peak_rate == pytest.approx(1.5e9 + 0.2e9 + 0.4e9)
    c = next(s for s in view.switches if s.component_id == "swC")
    assert c.r_bw == pytest.approx(4e9 / 8e9) and a.r_bw is None
    volumes = [sum(v) for v in expect.values()]
    top = max(volumes)
    assert [b.switches for b in view.histogram] == [
        sum(1 for v in volumes if min(int(v / (top / 5)), 4) == i) for i in range(5)
    ]
    assert view.histogram[-1].high == top and sum(b.switches for b in view.histogram) == 3
    mean = sum(volumes) / 3
    assert view.max_over_mean == pytest.approx(top / mean)
    assert view.cv == pytest.approx(statistics.pstdev(volumes) / mean)
    assert first_minute.total_bytes == pytest.approx(view.total_bytes / 2)


def test_interconnect_rbw_and_twait(tmp_path):
    t0 = datetime(2025, 1, 1, 0, 0, 0)
    rows = []
    for i, (tx, rx, wait) in enumerate([(1e9, 2e9, 10.0), (6.25e9, 1e9, 500.0), (0.0, 0.0, 0.0)]):
        ts = t0 + timedelta(seconds=10 * (i + 1))
        for port, scale in (("fwd1:mlx5_0:1", 1.0), ("cn1:mlx5_0:1", 0.5)):
            for metric, value in (("tx_bytes", tx), ("rx_bytes", rx), ("port_xmit_wait", wait)):
                rows.append((ts, 10.0, port, metric, value * scale))
            rows.append((ts, None, port, "rate_gbps", 100.0))
    table = pa.Table.from_pylist(
        [
            {"ts": ts, "interval_s": iv, "kind": "ib_port", "component_id": c, "job_id": None,
             "metric": m, "value": v}
            for ts, iv, c, m, v in rows
        ],
        schema=METRICS,
    )  # fmt: skip
    with DuckDBStore(tmp_path / "n.duckdb") as store:
        store.append("metrics", table)
        ports = {p.component_id: p for p in interconnect(store, tick_ns=4.0)}
        only = interconnect(store, hosts=["cn1"])
    fwd = ports["fwd1:mlx5_0:1"]
    assert fwd.r_bw == pytest.approx(6.25e9 / 12.5e9)  # 100 Gb/s = 12.5 GB/s
    assert fwd.tx_bytes == pytest.approx(10 * (1e9 + 6.25e9))
    assert fwd.xmit_wait_max == pytest.approx(5000.0)  # 500 ticks/s over 10 s
    assert fwd.t_wait_max_s == pytest.approx(5000 * 4e-9)
    assert ports["cn1:mlx5_0:1"].r_bw == pytest.approx(0.25)
    assert [p.component_id for p in only] == ["cn1:mlx5_0:1"] and only[0].t_wait_max_s is None


# -- OSS request statistics ------------------------------------------------------------------
def test_oss_request_statistics_match_weighted_means(sim):
    store, _ = sim
    view = oss_requests(store, bin_s=600)
    assert {s.component_id for s in view.servers} == {"oss01", "oss02", "oss03", "oss04"}
    assert view.missing is None
    ref = store.query(
        "SELECT component_id, sum(queue_len * interval_s) / sum(interval_s) AS q, "
        "max(wait_us) AS w, sum(active_threads * interval_s) / sum(interval_s) AS a, "
        "count(DISTINCT interval_s) AS lengths FROM server_samples "
        "WHERE kind = 'oss' AND job_id IS NULL GROUP BY ALL"
    ).to_pylist()
    # Rounds lost by the agents leave longer samples: the weighting is exercised.
    assert max(r["lengths"] for r in ref) > 1
    for r in ref:
        s = next(x for x in view.servers if x.component_id == r["component_id"])
        assert s.queue_len_mean == pytest.approx(r["q"])
        assert s.wait_us_max == pytest.approx(r["w"])
        assert s.active_threads_mean == pytest.approx(r["a"])
    means = [s.queue_len_mean for s in view.servers]
    assert means == sorted(means, reverse=True)
    assert len(view.bins) == 4 * len({b.start for b in view.bins})
    # The MDS's metadata service has the same statistics (mds/MDS/mdt/stats).
    mds = oss_requests(store, kinds=("mds",))
    assert [(s.component_id, s.kind) for s in mds.servers] == [("mds01", "mds")]


def test_request_statistics_per_target_do_not_exist_and_the_view_says_so(sim):
    """Lustre counts queues per service of a server, never per OST: asked for OSTs, the
    view is empty and names what exists instead."""
    store, _ = sim
    view = oss_requests(store, kinds=("ost",))
    assert view.servers == [] and view.bins == []
    assert "ost" in view.missing and "not per target" in view.missing
    before = store.query("SELECT min(ts) AS t FROM server_samples").to_pylist()[0]["t"]
    none = oss_requests(store, end=before)
    assert none.servers == [] and "ost/OSS/ost_io/stats" in none.missing


# -- heatmap -------------------------------------------------------------------------------
def test_heatmap_conserves_the_jobs_ost_bytes(sim):
    store, truth = sim
    job = max(truth["jobs"], key=lambda j: truth["jobs"][j]["read_bytes"])
    hm = ost_heatmap(store, job)
    ref = {
        r["component_id"]: (int(r["r"]), int(r["w"]))
        for r in store.query(
            "SELECT component_id, sum(read_bytes) AS r, sum(write_bytes) AS w "
            "FROM server_samples WHERE kind = 'ost' AND job_id = ? GROUP BY ALL",
            [job],
        ).to_pylist()
    }
    assert hm.osts == sorted(ref)
    assert len(hm.read) == len(hm.osts) and all(len(r) == len(hm.bins) for r in hm.read)
    for i, ost in enumerate(hm.osts):
        assert (sum(hm.read[i]), sum(hm.write[i])) == ref[ost]
        assert (hm.read_total[i], hm.write_total[i]) == ref[ost]
    assert 1 <= len(hm.bins) <= 61
    assert hm.rates()[0][0] == (hm.read[0][0] + hm.write[0][0]) / hm.bin_s
    with pytest.raises(NotFound):
        ost_heatmap(store, "no-such-job")


def test_load_summary_is_json_ready(sim):
    store, _ = sim
    doc = json.loads(to_json(load_summary(store)))
    assert set(doc["kinds"]) == set(KINDS)
    assert doc["forwarder_imbalance"]["kind"] == "forwarder"
    assert doc["mds"]["total_ops"] == doc["mds"]["job_ops"] + doc["mds"]["other_ops"]
    assert to_plain(hourly_load(store, "mds"))["unit"] == "ops/s"
