"""`iolens import io500`, `iolens expect` and `iolens compare` as a user runs them."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_cli
from tests.io500 import SAMPLES, write_run


def test_import_and_expect_on_the_samples(tmp_path):
    if not SAMPLES.is_dir():
        pytest.skip("shared IO500 submission samples not available")
    db = str(tmp_path / "s.duckdb")
    res = run_cli("import", "io500", str(SAMPLES), "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert len(got["runs"]) == 5 and got["phases"] == 60 and got["errors"] == []
    again = run_cli("import", "io500", str(SAMPLES), "--db", db)
    assert again.returncode == 0 and "Imported 5 IO500 run(s)" in again.stdout
    svg = tmp_path / "box.svg"
    res = run_cli("expect", "--db", db, "--json", "--plot", str(svg))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert {"runs", "box", "anomalous_runs", "boxes", "tail_latency"} <= set(data)
    assert len(data["runs"]) == 5 and all("run_id" in r for r in data["runs"])
    assert all({"run_id", "reason"} <= set(a) for a in data["anomalous_runs"])
    assert data["plot"] == str(svg) and "<svg" in svg.read_text()
    human = run_cli("expect", "--db", db, "--system", "cyfronet-helios-lustre-2024-sub708")
    assert human.returncode == 0, human.stderr
    assert "box of expectation" in human.stdout and "2024.05.03-09.25.44" in human.stdout


def test_import_errors_are_one_line_each(tmp_path):
    db = str(tmp_path / "s.duckdb")
    write_run(tmp_path / "runs" / "ok")
    (tmp_path / "runs" / "bad").mkdir()
    (tmp_path / "runs" / "bad" / "result.txt").write_text("[run]\nprocs = 4\n")
    res = run_cli("import", "io500", str(tmp_path / "runs"), "--db", db, "--system", "lab")
    assert res.returncode == 1  # some runs imported, some directories failed
    assert "Imported 1 IO500 run(s)" in res.stdout
    assert "error:" in res.stderr and "bad: no IO500 results" in res.stderr
    assert "Traceback" not in res.stderr
    res = run_cli("import", "io500", str(tmp_path / "nothing"), "--db", db)
    assert res.returncode == 2 and "no such file or directory" in res.stderr


def test_expect_errors_and_empty_store(tmp_path):
    db = str(tmp_path / "s.duckdb")
    write_run(tmp_path / "lab" / "results" / "r1")
    assert run_cli("import", "io500", str(tmp_path / "lab"), "--db", db).returncode == 0
    res = run_cli("expect", "--db", db, "--system", "elsewhere")
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "no IO500 runs of system 'elsewhere'" in res.stderr
    res = run_cli("expect", "--db", db, "--plot", str(tmp_path / "x.gif"))
    assert res.returncode == 2 and "plot format" in res.stderr
    res = run_cli("expect", "--db", db, "--job", "12345")
    assert res.returncode == 2 and "job 12345 is not in" in res.stderr


def test_expect_places_a_job(sim_db, tmp_path):
    db = tmp_path / "copy.duckdb"
    shutil.copy(sim_db.path, db)
    job_id = sorted(sim_db.truth["jobs"])[0]
    write_run(
        tmp_path / "lab" / "results" / "r1",
        {"ior-easy-write": 1e5, "ior-easy-read": 1e5, "ior-hard-write": 1e4, "ior-hard-read": 1e4},
    )
    assert run_cli("import", "io500", str(tmp_path / "lab"), "--db", str(db)).returncode == 0
    png = tmp_path / "job.png"
    res = run_cli("expect", "--db", str(db), "--job", job_id, "--json", "--plot", str(png))
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["job"]
    assert job["job_id"] == job_id and job["system"] == "lab"
    assert job["verdict"] == "below worst case" and job["target"] == "application"
    assert png.read_bytes()[:4] == b"\x89PNG"
    human = run_cli("expect", "--db", str(db), "--job", job_id)
    assert f"Job {job_id}" in human.stdout and "below worst case" in human.stdout
    assert "metadata by the paper's formula" in human.stdout or job["paper_md_rate"] is None
    # the job report carries the same placement, scaled to the job's nodes (10 in IO500)
    rep = run_cli("job", job_id, "--db", str(db), "--json")
    assert rep.returncode == 0, rep.stderr
    placed = json.loads(rep.stdout)["expectation"]
    assert placed["verdict"] == job["verdict"] and placed["scale"] == job["scale"]
    nodes = sim_db.truth["jobs"][job_id]["nnodes"]
    assert job["scale"]["job_nodes"] == nodes and job["scale"]["io500_nodes"] == 10
    assert job["scale"]["factor"] == min(1.0, nodes / 10)
    text = run_cli("job", job_id, "--db", str(db))
    assert "IO500 box (lab" in text.stdout and "below worst case" in text.stdout


def test_compare_cli(sim_db):
    db = str(sim_db.path)
    res = run_cli("compare", "--tag", "lammps", "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert {"runs", "metrics", "best", "worst"} <= set(data)
    lammps = [j for j, t in sim_db.truth["jobs"].items() if t["app"] == "lammps"]
    assert sorted(r["job_id"] for r in data["runs"]) == sorted(lammps)
    assert [r["position"] for r in data["runs"]] == list(range(1, len(lammps) + 1))
    two = [r["job_id"] for r in data["runs"][:2]]
    human = run_cli("compare", *two, "--db", db)
    assert human.returncode == 0, human.stderr
    assert "req_qdepth" in human.stdout and "score" in human.stdout and "Best: job" in human.stdout
    res = run_cli("compare", two[0], "--db", db)
    assert res.returncode == 2 and "at least two" in res.stderr
    res = run_cli("compare", "--tag", "no-such-app", "--db", db)
    assert res.returncode == 2 and "no jobs of application" in res.stderr


def test_expect_plot_draws_the_box_the_verdict_used(sim_db, tmp_path):
    """The plotted job box is IO500's box times job nodes / IO500 nodes, as the verdict's."""
    if not SAMPLES.is_dir():
        pytest.skip("shared IO500 submission samples not available")
    from iolens.analyze.expect.plot import figure

    db = tmp_path / "copy.duckdb"
    shutil.copy(sim_db.path, db)
    assert run_cli("import", "io500", str(SAMPLES), "--db", str(db)).returncode == 0
    system = "cyfronet-helios-lustre-2024-sub708"  # 80 client nodes in its config.ini
    io500_nodes = 80
    job_id, nodes = next(
        (j, t["nnodes"])
        for j, t in sorted(sim_db.truth["jobs"].items())
        if 1 < t["nnodes"] < io500_nodes
    )
    svg = tmp_path / "job.svg"
    res = run_cli(
        "expect", "--db", str(db), "--system", system, "--job", job_id, "--json", "--plot", str(svg)
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    (group,) = data["boxes"]
    f = nodes / io500_nodes
    fig = figure(data)
    for view in ("aggregate", "write", "read"):
        want = {k: group[view][k] * f for k in ("bw_lo", "bw_hi", "md_lo", "md_hi")}
        (rect,) = fig.findobj(lambda a, v=view: a.get_gid() == f"jobbox-{job_id}-{v}")
        assert rect.get_x() == pytest.approx(want["bw_lo"])
        assert rect.get_x() + rect.get_width() == pytest.approx(want["bw_hi"])
        assert rect.get_y() == pytest.approx(want["md_lo"])
        assert rect.get_y() + rect.get_height() == pytest.approx(want["md_hi"])
        # the verdict was judged against the same box
        assert data["job"]["boxes"][view] == pytest.approx(want)
    text = svg.read_text()
    assert f'id="jobbox-{job_id}-aggregate"' in text
    assert f"IO500's x{f:.3g} ({nodes} of {io500_nodes} nodes)" in text
