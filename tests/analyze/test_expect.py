"""The IO500 box of expectation: corners, union, stability, the hard>easy flag, tails,
placing a job, and the plot."""

from __future__ import annotations

import itertools
import math
import re
import shutil
from datetime import datetime, timedelta

import pytest

from iolens.analyze import expect
from iolens.analyze.expect import box as bx
from iolens.analyze.expect.placement import MIN_MD_OPS, paper_md_rate, point_of
from iolens.analyze.expect.plot import plot
from iolens.errors import InputError, NotFound
from iolens.ingest.importers import io500
from iolens.store import DuckDBStore
from tests.io500 import BASE, SAMPLES, write_run

needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir(), reason="shared IO500 submission samples not available"
)
HELIOS = "2024.05.03-09.25.44"


@pytest.fixture(scope="module")
def samples_db(tmp_path_factory):
    if not SAMPLES.is_dir():
        pytest.skip("shared IO500 submission samples not available")
    path = tmp_path_factory.mktemp("io500") / "s.duckdb"
    with DuckDBStore(path) as store:
        assert io500.import_paths(store, [SAMPLES]).errors == []
    return path


def _jittered(i: int) -> dict[str, float]:
    """Run i of a series: a deterministic +-10 % wobble around BASE."""
    return {p: v * (1 + 0.1 * math.sin(1.7 * i + k)) for k, (p, v) in enumerate(BASE.items())}


@pytest.fixture
def series_db(tmp_path):
    """Twelve ordinary POSIX runs of one system, one with ior-hard-write > ior-easy-write,
    and two MPI-IO runs."""
    root = tmp_path / "lab" / "results"
    t0 = datetime(2024, 1, 1, 8)
    for i in range(12):
        write_run(root / f"run{i:02d}", _jittered(i), start=t0 + timedelta(days=i))
    write_run(root / "broken", {"ior-hard-write": 25.0}, start=t0 + timedelta(days=20))
    for i in range(2):
        write_run(root / f"mpi{i}", _jittered(i), api="MPIIO", start=t0 + timedelta(hours=i))
    path = tmp_path / "s.duckdb"
    with DuckDBStore(path) as store:
        assert io500.import_paths(store, [root]).errors == []
    return path


# -- pure functions --------------------------------------------------------------------------


def test_corners_follow_the_views():
    c = bx.corners(BASE)
    agg = c["aggregate"]
    assert agg.easy_bw == pytest.approx(math.sqrt(20.0 * 30.0))
    assert agg.hard_bw == pytest.approx(math.sqrt(2.0 * 4.0))
    assert agg.easy_md == pytest.approx((60.0 * 200.0 * 40.0) ** (1 / 3))
    assert agg.hard_md == pytest.approx((10.0 * 80.0 * 30.0 * 12.0) ** (1 / 4))
    assert (c["write"].easy_bw, c["write"].hard_md) == (20.0, 10.0)
    assert c["read"].hard_md == pytest.approx(math.sqrt(80.0 * 30.0))
    assert c["aggregate"].box() == bx.Box(agg.hard_bw, agg.easy_bw, agg.hard_md, agg.easy_md)
    missing = bx.corners({k: v for k, v in BASE.items() if k != "ior-hard-read"})
    assert missing["aggregate"].hard_bw is None and missing["aggregate"].box() is None
    assert missing["write"].box() is not None


def test_hard_beating_easy_is_flagged_with_a_reason():
    assert bx.inversions(BASE) == []
    found = bx.inversions({**BASE, "ior-hard-write": 25.0})
    assert [i.what for i in found] == ["ior-hard-write"]
    assert found[0].excess == pytest.approx(0.25)
    reason = bx.anomaly_reason(found)
    assert reason is not None
    assert "ior-hard-write 25 GiB/s > ior-easy-write 20 GiB/s (+25 %)" in reason
    assert "probable system fault" in reason and "bandwidth" in reason
    # a view axis that combines phases is checked too
    both = bx.inversions({**BASE, "ior-hard-write": 25.0, "ior-hard-read": 40.0})
    assert [i.what for i in both] == ["ior-hard-write", "ior-hard-read", "aggregate bandwidth"]
    # a tolerance keeps small inversions quiet
    assert bx.inversions({**BASE, "mdtest-hard-stat": 204.0}, tolerance=0.05) == []
    assert [i.what for i in bx.inversions({**BASE, "mdtest-hard-stat": 204.0})] == [
        "mdtest-hard-stat"
    ]


def test_union_and_stability():
    boxes = [bx.Box(1, 10, 5, 50), bx.Box(2, 12, 4, 40), bx.Box(1.5, 11, 5, 45)]
    assert bx.union(boxes) == bx.Box(1, 12, 4, 50)
    assert bx.union([None]) is None
    steps = bx.stability([(str(i), b) for i, b in enumerate(boxes)])
    assert [s.runs for s in steps] == [1, 2, 3]
    assert steps[0].change is None
    assert steps[1].box == bx.Box(1, 12, 4, 50)
    assert steps[1].change == pytest.approx(max(11 / 9 - 1, 46 / 45 - 1))
    assert steps[2].change == 0.0
    # growing every time: never stable; settling: stable after the last growth
    growing = [(str(i), bx.Box(1, 10 + 3 * i, 1, 10 + 3 * i)) for i in range(8)]
    assert bx.stable_after(bx.stability(growing)) is None
    settling = growing[:3] + [(f"s{i}", bx.Box(2, 15, 2, 15)) for i in range(4)]
    assert bx.stable_after(bx.stability(settling)) == 3


def test_percentiles():
    got = bx.percentiles([4.0, 1.0, 3.0, 2.0])
    assert (got["min"], got["p50"], got["max"], got["mean"]) == (1.0, 2.5, 4.0, 2.5)
    assert got["p90"] == pytest.approx(3.7)
    assert bx.percentiles([]) == {}


def test_place_job_verdicts():
    b = bx.Box(1.0, 10.0, 5.0, 50.0)
    below = expect.place_job(b, 0.5, 20.0, "lab")
    assert below.verdict == expect.BELOW and below.target == "application"
    assert "below what even IO500's 'hard' test gets on lab" in below.meaning
    assert "iolens anomalies" in below.meaning
    md_below = expect.place_job(b, 5.0, 1.0)
    assert md_below.verdict == expect.BELOW and "metadata" in md_below.meaning
    within = expect.place_job(b, 2.5, 20.0)
    assert within.verdict == expect.WITHIN and within.gain_factor == pytest.approx(4.0)
    assert "not a system problem" in within.meaning
    assert expect.expected_gain(within) == {
        "metric": "bandwidth",
        "factor": 4.0,
        "basis": "IO500 easy-case bandwidth",
    }
    near = expect.place_job(b, 9.0, 45.0)
    assert near.verdict == expect.NEAR_BEST and near.target == "system"
    assert expect.expected_gain(near) is None
    # beating 'easy' is the page cache (the paper's short BTIO run), never praised
    cached = expect.place_job(b, 30.0, None)
    assert cached.verdict == expect.CACHED and "page cache" in cached.meaning
    assert "well tuned" not in cached.meaning and "not a sign of good tuning" in cached.meaning
    assert [a.axis for a in cached.axes] == ["bandwidth"]
    assert expect.expected_gain(cached) is None
    assert expect.place_job(b, 9.0, 60.0).verdict == expect.CACHED  # on metadata too
    # near best needs every axis it exercised near best
    assert expect.place_job(b, 9.0, 10.0).verdict == expect.WITHIN
    assert expect.place_job(b, None, None).verdict is None
    assert expect.place_job(None, 1.0, 1.0).verdict is None


def test_box_scaled_to_the_jobs_nodes():
    b = bx.Box(1.0, 10.0, 5.0, 50.0)
    quarter, f = expect.scaled(b, 4, 16.0)
    assert f == 0.25 and quarter == bx.Box(0.25, 2.5, 1.25, 12.5)
    # never above IO500's own results, and unscaled when a node count is unknown
    assert expect.scaled(b, 64, 16.0) == (b, 1.0)
    assert expect.scaled(b, None, 16.0) == (b, 1.0) == expect.scaled(b, 4, None)
    # a job at 2 GiB/s on 4 nodes: within the 16-node box, near the best of its quarter
    assert expect.place_job(b, 2.0, None).verdict == expect.WITHIN
    assert expect.place_job(quarter, 2.0, None).verdict == expect.NEAR_BEST


def test_paper_metadata_rate():
    """The paper's formula: all I/O operations over the metadata time, in kIOPS."""
    assert paper_md_rate(50_000, 2.0) == 25.0
    assert paper_md_rate(0, 2.0) is None and paper_md_rate(10, 0.0) is None
    assert paper_md_rate(10, None) is None


def test_job_point_units():
    gib = 2**30
    # 10 GiB read at 1 GiB/s (10 s) and 10 GiB written at 2 GiB/s (5 s): 20 GiB in 15 s
    bw, md, rbw, wbw = point_of(10 * gib, 10 * gib, gib, 2 * gib, 5000, 250.0)
    assert bw == pytest.approx(20 / 15) and (rbw, wbw) == (1.0, 2.0)
    assert md == 0.25  # kIOPS
    assert point_of(0, 0, None, None, MIN_MD_OPS - 1, 10.0) == (None, None, None, None)


# -- on stored runs --------------------------------------------------------------------------


@needs_samples
def test_samples_box_and_flags(samples_db):
    with DuckDBStore(samples_db, create=False) as store:
        data = expect.expectations(store)
    assert {r["run_id"] for r in data["runs"]} == {
        "2023.11.07-03.43.32",
        "good-2023.03.22-18.10.33",
        HELIOS,
        "results",
        "dkrz-mistral-lustre02-2021-sub539",
    }
    flagged = {a["run_id"]: a for a in data["anomalous_runs"]}
    # Aurora (DAOS): mdtest-hard-stat and -delete beat easy; Mistral lustre01 (2018): delete
    assert set(flagged) == {"2023.11.07-03.43.32", "results"}
    assert [i["what"] for i in flagged["2023.11.07-03.43.32"]["inversions"]] == [
        "mdtest-hard-stat",
        "mdtest-hard-delete",
    ]
    assert (
        "mdtest-hard-delete 6.335 kIOPS > mdtest-easy-delete 5.252 kIOPS"
        in (flagged["results"]["reason"])
    )
    helios = next(r for r in data["runs"] if r["run_id"] == HELIOS)
    agg = helios["views"]["aggregate"]
    assert agg["easy_bw"] == pytest.approx(math.sqrt(352.803032 * 464.646333))
    assert agg["hard_bw"] == pytest.approx(math.sqrt(5.996531 * 227.682852))
    assert not helios["anomalous"] and helios["in_box"]
    g = next(b for b in data["boxes"] if b["system"] == "cyfronet-helios-lustre-2024-sub708")
    assert g["write"] == {
        "bw_lo": 5.996531,
        "bw_hi": 352.803032,
        "md_lo": 66.621419,
        "md_hi": 119.11315,
    }
    assert g["runs"] == [HELIOS] and g["stable"] is False and not g["from_anomalous"]
    # a system with only anomalous runs still gets a box, marked as such
    aurora = next(b for b in data["boxes"] if b["system"] == "anl-aurora-daos-2023-sub688")
    assert aurora["from_anomalous"] and aurora["aggregate"] is not None
    assert data["box"]["runs"] == 5


@needs_samples
def test_samples_tails(samples_db):
    with DuckDBStore(samples_db, create=False) as store:
        data = expect.expectations(store, system="cyfronet-helios-lustre-2024-sub708")
        with pytest.raises(NotFound, match=r"no IO500 runs of system 'nope'.*known: "):
            expect.expectations(store, system="nope")
    assert {r["system"] for r in data["runs"]} == {"cyfronet-helios-lustre-2024-sub708"}
    tails = {t["phase"]: t for t in data["tail_latency"]}
    assert "find" in tails and tails["ior-hard-read"]["time_s"]["max"] == 8.76
    (ranks,) = tails["ior-easy-write"]["ranks"]
    assert ranks["items_spread"] == pytest.approx(109118 / 78934)
    assert ranks["rank_time_max"] >= ranks["rank_time_p99"] >= ranks["rank_time_p50"]
    assert ranks["tail_ratio"] >= 1.0


def test_box_of_a_series_excludes_the_faulty_run(series_db):
    with DuckDBStore(series_db, create=False) as store:
        data = expect.expectations(store, system="lab")
        wide = expect.expectations(store, system="lab", include_anomalous=True)
        mpi = expect.expectations(store, system="lab", api="MPIIO")
    (bad,) = data["anomalous_runs"]
    assert bad["run_id"] == "broken" and "ior-hard-write" in bad["reason"]
    posix = next(b for b in data["boxes"] if b["api"] == "POSIX")
    assert posix["excluded"] == ["broken"] and len(posix["runs"]) == 12
    expected = bx.union(bx.corners(_jittered(i))["aggregate"].box() for i in range(12))
    assert expected is not None
    got = posix["aggregate"]
    assert got == pytest.approx(
        {
            "bw_lo": expected.bw_lo,
            "bw_hi": expected.bw_hi,
            "md_lo": expected.md_lo,
            "md_hi": expected.md_hi,
        }
    )
    # the union over both APIs is the top-level box
    assert data["box"]["groups"] == ["lab/MPIIO", "lab/POSIX"] and data["box"]["runs"] == 14
    # stability: one step per run in time order; the box only grows
    steps = posix["stability"]
    assert [s["runs"] for s in steps] == list(range(1, 13))
    assert [s["run_id"] for s in steps] == [f"run{i:02d}" for i in range(12)]
    assert all(
        b["width"] >= a["width"] and b["height"] >= a["height"]
        for a, b in itertools.pairwise(steps)
    )
    assert posix["stable_after"] is not None and posix["stable_after"] <= 9
    # with --include-anomalous the faulty run widens the write box up to its hard result
    wide_posix = next(b for b in wide["boxes"] if b["api"] == "POSIX")
    assert wide_posix["excluded"] == [] and wide_posix["write"]["bw_hi"] == 25.0
    assert {r["api"] for r in mpi["runs"]} == {"MPIIO"}


@needs_samples
def test_plot_renders_boxes_runs_and_flags(samples_db, tmp_path):
    with DuckDBStore(samples_db, create=False) as store:
        data = expect.expectations(store)
    svg = plot(data, tmp_path / "box.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    # one union box per system/API and view, each run's corners, the flagged runs
    assert len(re.findall(r'id="box-', svg)) == 5 * 3
    assert 'id="run-2024.05.03-09.25.44-aggregate-easy"' in svg
    assert 'id="run-2024.05.03-09.25.44-aggregate-hard"' in svg
    assert 'id="anomalous-results-aggregate"' in svg  # Mistral 2018: aggregate md inverted
    assert "results: hard &gt; easy" in svg
    for title in ("aggregate", "write", "read"):
        assert f"IO500 box of expectation: {title}" in svg
    assert "bandwidth (GiB/s)" in svg and "metadata rate (kIOPS)" in svg
    png = plot(data, tmp_path / "box.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    with pytest.raises(InputError, match="plot format"):
        plot(data, tmp_path / "box.gif")


def test_place_a_simulated_job(sim_db, tmp_path):
    """A real job of the simulated cluster placed in boxes built from constructed runs."""
    path = tmp_path / "copy.duckdb"
    shutil.copy(sim_db.path, path)
    with DuckDBStore(path) as store:
        pt = _busiest_job(store)
        assert pt.bandwidth is not None and pt.layer == "posix"
        md = pt.md_rate or 1.0
        # three systems: one where the job is below the worst case, one where it is
        # within the box, and one where it is near the best case
        root = tmp_path / "runs"
        for name, scale in (("fast", 20.0), ("mid", 4.0), ("slow", 1.1)):
            values = {p: pt.bandwidth * scale for p in ("ior-easy-write", "ior-easy-read")}
            values |= {p: pt.bandwidth * scale / 10 for p in ("ior-hard-write", "ior-hard-read")}
            values |= {p: md * scale for p in BASE if p.startswith("mdtest-easy")}
            values |= {p: md * scale / 10 for p in BASE if p.startswith("mdtest-hard")}
            write_run(root / name / "results" / "r1", values)
        assert io500.import_paths(store, [root]).errors == []
        with pytest.raises(InputError, match="several systems"):
            expect.place(store, pt.job_id)
        verdicts = {s: expect.place(store, pt.job_id, system=s) for s in ("fast", "mid", "slow")}
    assert verdicts["fast"]["verdict"] == expect.BELOW
    assert verdicts["fast"]["target"] == "application"
    assert verdicts["mid"]["verdict"] == expect.WITHIN
    assert verdicts["slow"]["verdict"] == expect.NEAR_BEST
    assert verdicts["slow"]["target"] == "system"
    mid = verdicts["mid"]
    assert mid["point"]["bandwidth"] == pytest.approx(pt.bandwidth)
    assert mid["system"] == "mid" and mid["api"] == "POSIX"
    assert mid["gain"]["metric"] == "bandwidth"
    assert mid["gain"]["factor"] == pytest.approx(4.0, rel=0.01)
    assert "mid" in mid["gain"]["basis"]
    assert set(mid["by_direction"]) <= {"read", "write"} and mid["by_direction"]


@needs_samples
def test_place_a_simulated_job_scaled_to_its_nodes_and_cached(sim_db, tmp_path):
    """The same job against IO500 runs on its own node count and on 4x as many: easy at
    4.4x its rates is 'within' at its own scale and 'near best' at a quarter of 4x the
    nodes (1.1x); against a system whose easy result is half its bandwidth it is caching.
    The paper's metadata rate is the report's own operations over its metadata time."""
    from iolens.analyze import report

    path = tmp_path / "copy.duckdb"
    shutil.copy(sim_db.path, path)
    with DuckDBStore(path) as store:
        pt = _busiest_job(store)
        md = pt.md_rate or 1.0
        root = tmp_path / "runs"
        for name, scale, nodes in (("own", 4.4, pt.nodes), ("big", 4.4, 4 * pt.nodes),
                                   ("tiny", 0.5, pt.nodes)):  # fmt: skip
            values = {p: pt.bandwidth * scale for p in ("ior-easy-write", "ior-easy-read")}
            values |= {p: pt.bandwidth * scale / 10 for p in ("ior-hard-write", "ior-hard-read")}
            values |= {p: md * scale for p in BASE if p.startswith("mdtest-easy")}
            values |= {p: md * scale / 10 for p in BASE if p.startswith("mdtest-hard")}
            write_run(root / name / "results" / "r1", values, nodes=nodes)
        assert io500.import_paths(store, [root]).errors == []
        got = {s: expect.place(store, pt.job_id, system=s) for s in ("own", "big", "tiny")}
        rep = report.build(store, pt.job_id)
    assert pt.nodes > 0
    assert got["own"]["scale"] == {"job_nodes": pt.nodes, "io500_nodes": pt.nodes, "factor": 1.0}
    assert got["own"]["verdict"] == expect.WITHIN
    assert got["big"]["scale"]["factor"] == pytest.approx(0.25)
    assert got["big"]["verdict"] == expect.NEAR_BEST
    assert got["big"]["box"]["bw_hi"] == pytest.approx(pt.bandwidth * 4.4 / 4, rel=0.02)
    assert got["tiny"]["verdict"] == expect.CACHED and "page cache" in got["tiny"]["meaning"]
    pm = got["own"]["paper_md_rate"]
    ops = rep.read_ops + rep.write_ops + rep.md_ops
    b = rep.bandwidth
    meta = b["io_time_s"] - b["read_time_s"] - b["write_time_s"]
    assert pm["ops"] == ops and pm["meta_time_s"] == pytest.approx(meta)
    assert pm["value"] == pytest.approx(ops / meta / 1000)


def _busiest_job(store: DuckDBStore) -> expect.JobPoint:
    """The point of the job that moved the most bytes."""
    rows = store.query(
        "SELECT job_id FROM job_summaries ORDER BY read_bytes + write_bytes DESC, job_id LIMIT 1"
    ).to_pylist()
    return expect.job_point(store, rows[0]["job_id"])
