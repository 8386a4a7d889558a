"""Interference from the latencies real Lustre servers report, on hand-built stores.

The store holds what an OSS agent and the tracer give for a closed-loop model whose answer
is known: one OST whose handling time is fixed (8 threads, 10 ms per 1 MiB RPC) and whose
queue grows past 8 requests in flight; a victim keeping 8 requests in flight and culprits
keeping 24 and 8. Each job's rate is its share of the in-flight requests times the OST's
800 RPC/s, so the victim's lost time and who caused it follow exactly from the model.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from iolens.analyze.jobs import baseline, interference, service
from iolens.model.ids import file_id
from iolens.model.schema import ANOMALIES, CLIENT_IO, COMPONENTS, FORWARDING, JOBS, SERVER_SAMPLES
from iolens.store import DuckDBStore

T0 = datetime(2025, 1, 6, 8, 0)
RATE = 800.0  # RPC/s the OST serves when busy
THREADS = 8
RPC = 2**20
DT = 10


def _store(
    path: Path,
    jobs: dict[str, tuple[int, int, int]],
    *,
    per_job_latency: bool = True,
    noise: float = 0.0,
    nodes: dict[str, list[str]] | None = None,
) -> DuckDBStore:
    """jobs: id -> (in-flight requests, first second, last second) of its I/O."""
    rng = np.random.default_rng(1)
    st = DuckDBStore(path)
    end = max(e for _, _, e in jobs.values())
    samples, io = [], []
    for k in range(end // DT):
        t = T0 + timedelta(seconds=(k + 1) * DT)
        live = {j: n for j, (n, a, e) in jobs.items() if a <= k * DT < e}
        total = sum(live.values())
        if not total:
            continue
        svc = THREADS / RATE * 1e6 * (np.exp(rng.normal(0, noise)) if noise else 1.0)
        wait = max(0, total - THREADS) / RATE * 1e6
        ops_all = 0
        for j, n in live.items():
            ops = round(n / total * RATE * DT)
            ops_all += ops
            samples.append(
                dict(
                    ts=t,
                    interval_s=DT,
                    kind="ost",
                    component_id="fs-OST0000",
                    job_id=j,
                    read_bytes=ops * RPC,
                    write_bytes=0,
                    read_ops=ops,
                    write_ops=0,
                    md_ops=0,
                    service_us=svc if per_job_latency else None,
                )
            )
        samples.append(
            dict(
                ts=t,
                interval_s=DT,
                kind="ost",
                component_id="fs-OST0000",
                job_id=None,
                read_bytes=ops_all * RPC,
                write_bytes=0,
                read_ops=ops_all,
                write_ops=0,
                md_ops=0,
                service_us=svc,
            )
        )
        samples.append(
            dict(
                ts=t,
                interval_s=DT,
                kind="oss",
                component_id="oss1",
                job_id=None,
                wait_us=wait,
                queue_len=max(0, total - THREADS),
                active_threads=min(total, THREADS),
                service_us=svc,
            )
        )
    for j, (_n, a, e) in jobs.items():
        fid = file_id(f"/lus/{j}/data")
        for op, t0, t1, cnt, size in (
            ("open", a, a, 1, 0),
            ("read", a, e, 100, RPC),
            ("close", e, e, 1, 0),
        ):
            io.append(
                dict(
                    job_id=j,
                    node=f"n{j}",
                    rank=0,
                    pid=1,
                    layer="posix",
                    op=op,
                    file_id=fid,
                    offset=0,
                    size=size,
                    stride=size,
                    count=cnt,
                    t_start=T0 + timedelta(seconds=t0),
                    t_end=T0 + timedelta(seconds=t1),
                    dur_ns=1000,
                )
            )
    nodes = nodes or {j: [f"n{j}"] for j in jobs}
    st.append(
        "jobs",
        pa.Table.from_pylist(
            [
                dict(
                    job_id=j,
                    user="u",
                    app=f"app{j}",
                    nodes=nodes[j],
                    nprocs=1,
                    start=T0 + timedelta(seconds=a),
                    end=T0 + timedelta(seconds=e),
                    state="COMPLETED",
                    source="slurm",
                )
                for j, (_n, a, e) in jobs.items()
            ],
            schema=JOBS,
        ),
    )
    st.append("server_samples", pa.Table.from_pylist(samples, schema=SERVER_SAMPLES))
    st.append("client_io", pa.Table.from_pylist(io, schema=CLIENT_IO))
    st.append(
        "components",
        pa.Table.from_pylist(
            [
                dict(
                    component_id="fs-OST0000",
                    kind="ost",
                    parent="oss1",
                    peak_bw=None,
                    peak_ops=None,
                )
            ],
            schema=COMPONENTS,
        ),
    )
    return st


def test_victim_loss_and_its_culprit_follow_the_closed_loop_model(tmp_path):
    # victim alone 0-150 s (solo samples fix the baseline), culprit joins 150-350 s
    with _store(tmp_path / "a.duckdb", {"1": (8, 0, 350), "2": (24, 150, 350)}) as st:
        diag = interference.diagnose(st)
    # with the culprit, 32 in flight: latency 40 ms against 10 ms alone, 3/4 of each second
    # lost for 200 s (150 s): the work that took 200 s beside it takes 50 s alone, so all
    # of it is the culprit's doing (the victim's own 8 in flight are in its 10 ms alone)
    assert diag.delays[("1", "2")] == pytest.approx(150.0, rel=0.02)
    pair = next(p for p in diag.pairs if p.victim == "1")
    assert (pair.culprit, pair.component, pair.feature) == ("2", "fs-OST0000", "high_bw")
    t0 = T0.timestamp()
    assert abs(pair.start - (t0 + 150)) <= DT and abs(pair.end - (t0 + 350)) <= DT
    # the culprit ran alone on its own requests' terms: it loses to the victim much less
    assert diag.delays.get(("2", "1"), 0.0) < diag.delays[("1", "2")] / 2
    assert not diag.gaps or all("forwarding" in g["missing"] for g in diag.gaps)


def test_two_culprits_share_the_loss_by_the_busy_time_they_took(tmp_path):
    jobs = {"1": (8, 0, 350), "2": (24, 150, 350), "3": (8, 150, 350)}
    with _store(tmp_path / "b.duckdb", jobs) as st:
        diag = interference.diagnose(st)
    # 40 in flight: 50 ms against 10 ms, 4/5 of 200 s lost (160 s), split by the others'
    # busy shares: 24/32 to job 2, 8/32 to job 3
    assert diag.delays[("1", "2")] == pytest.approx(120.0, rel=0.03)
    assert diag.delays[("1", "3")] == pytest.approx(40.0, rel=0.03)
    kept = {(p.victim, p.culprit) for p in diag.pairs}
    # 120 s is over a quarter of the victim's 350 s of I/O; 40 s is not
    assert ("1", "2") in kept and ("1", "3") not in kept


def test_noise_without_contention_costs_nobody_anything(tmp_path):
    # two jobs that never overlap, with 30 % log-normal noise on the handling time
    jobs = {"1": (8, 0, 600), "2": (8, 600, 1200)}
    with _store(tmp_path / "c.duckdb", jobs, noise=0.3) as st:
        diag = interference.diagnose(st)
    assert not diag.pairs and sum(diag.delays.values()) == 0.0


def _second_ost(st: DuckDBStore, offset_s: float) -> None:
    """A copy of the OST and its OSS whose clock runs `offset_s` ahead: its samples end
    between the first one's, as two servers' samples do."""
    shift = timedelta(seconds=offset_s)
    rows = st.query("SELECT * FROM server_samples").to_pylist()
    for r in rows:
        r["ts"] += shift
        r["component_id"] = {"fs-OST0000": "fs-OST0001", "oss1": "oss2"}[r["component_id"]]
        if r["service_us"] is not None:  # a little slower: the two differ each second
            r["service_us"] *= 1.1
    st.append("server_samples", pa.Table.from_pylist(rows, schema=SERVER_SAMPLES))
    row = dict(component_id="fs-OST0001", kind="ost", parent="oss2", peak_bw=None, peak_ops=None)
    st.append("components", pa.Table.from_pylist([row], schema=COMPONENTS))


def test_windows_add_up_to_the_span(tmp_path):
    """What the distributed analysis relies on: baseline histograms (each from the samples
    starting in the window) and tallies (each of the window's seconds, against every sample
    covering it) computed window by window equal the whole span's, with two servers whose
    samples straddle the window edges at different times."""
    jobs = {"1": (8, 0, 900), "2": (24, 150, 450), "3": (4, 500, 800)}
    n1: set[str] = set()
    with _store(tmp_path / "d.duckdb", jobs, noise=0.2) as st:
        _second_ost(st, 4.0)
        by_job = interference._bursts(st, interference.EVERYTHING, n1)
        found = interference.diagnosis_order(b for bs in by_job.values() for b in bs)
        lo, hi = interference.sample_span(found[0].start, max(b.end for b in found))
        edges = interference.window_edges(lo, hi, 120)
        loaded = [service.load(st, a, b) for a, b in edges]
        whole_fit, whole, _other, every = interference.tally_span(st, lo, hi, found, n1)
    assert len(edges) >= 5 and sum(s.owned.sum() for s in loaded) == every.owned.sum()
    assert sum(len(s) for s in loaded) > len(every)  # edge samples are read twice ...
    fitted = baseline.merge(baseline.samples(s) for s in loaded)  # ... and counted once
    assert fitted.every.keys() == whole_fit.every.keys() and fitted.threads == whole_fit.threads
    for k, h in whole_fit.every.items():
        assert np.array_equal(fitted.every[k], h)
    parts = [
        interference.window_tallies(s, fitted, interference.overlapping(found, a, b), n1)
        for s, (a, b) in zip(loaded, edges, strict=True)
    ]
    windowed = interference.merge_tallies(t for t, _ in parts)
    assert windowed.keys() == whole.keys() and whole
    assert {k[2] for k in whole} == {"fs-OST0000", "fs-OST0001"}
    for key, t in whole.items():
        w = windowed[key]
        assert (w.start, w.end, w.seconds) == (t.start, t.end, t.seconds), key
        assert w.delay == pytest.approx(t.delay, rel=1e-9), key


def test_untagged_clients_are_other_clients_not_culprits(tmp_path):
    """A `procname.uid` entry in job_stats (a process outside any job) is not a job: the
    victim's loss to it is reported as its loss to other clients."""
    jobs = {"1": (8, 0, 350), "find.1003": (24, 150, 350)}
    with _store(tmp_path / "e.duckdb", jobs) as st:
        st.execute("DELETE FROM jobs WHERE job_id = 'find.1003'")
        diag = interference.diagnose(st)
    assert not diag.pairs and not [k for k in diag.delays if k[1] == "find.1003"]
    assert diag.other["1"] == pytest.approx(150.0, rel=0.02)


@pytest.mark.parametrize(("culprit_nodes", "episode"), [(40, True), (32, False)])
def test_n1_episode_by_beacons_criterion(tmp_path, culprit_nodes, episode):
    """Beacon 4.1: N-1 jobs harm the jobs sharing their forwarders "particularly when N is
    large (e.g., over 32 compute nodes)"."""
    nodes = {"1": ["v1"], "2": [f"c{i}" for i in range(culprit_nodes)]}
    jobs = {"1": (8, 0, 350), "2": (24, 150, 350)}
    with _store(tmp_path / "f.duckdb", jobs, nodes=nodes) as st:
        st.append(
            "forwarding",
            pa.Table.from_pylist(
                [{"compute_node": n, "forwarder": "fwd1"} for ns in nodes.values() for n in ns],
                schema=FORWARDING,
            ),
        )
        diag = interference.diagnose(st, n1={"2"})
    assert [p.feature for p in diag.pairs if p.victim == "1"] == ["n1"]
    if not episode:
        assert not diag.episodes
        return
    (ep,) = diag.episodes
    assert (ep["component_id"], ep["evidence"]["culprit"]) == ("fwd1", "2")
    assert ep["evidence"]["culprit_nodes_behind_forwarder"] == culprit_nodes
    assert set(ep["evidence"]["victims"]) == {"1"}


def test_a_degraded_target_is_not_its_neighbours_fault(tmp_path):
    """While a slow_ost episode covers the OST, latency up to its measured slowdown is the
    OST's own: here the whole excess, so nobody is charged."""
    jobs = {"1": (8, 0, 350), "2": (24, 150, 350)}
    with _store(tmp_path / "g.duckdb", jobs) as st:
        st.append(
            "anomalies",
            pa.Table.from_pylist(
                [
                    {
                        "kind": "slow_ost",
                        "component_kind": "ost",
                        "component_id": "fs-OST0000",
                        "start": T0 + timedelta(seconds=140),
                        "end": T0 + timedelta(seconds=360),
                        "severity": "warning",
                        "evidence": '{"slowdown": 4.0}',
                        "detector": "slow_ost",
                        "created": T0,
                    }
                ],
                schema=ANOMALIES,
            ),
        )
        diag = interference.diagnose(st)
    assert not diag.pairs and diag.delays.get(("1", "2"), 0.0) <= 0.0
