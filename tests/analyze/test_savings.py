"""What a fix would save: the per-call fit against calls of known cost, the IO500 box
scaled to a job, the savings every job finding carries on the simulated day, their order,
and `iolens seff`."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from iolens.analyze import report, savings
from iolens.analyze.findings import JOB_RULES
from iolens.analyze.seff import line, seff
from iolens.ingest.importers import io500
from iolens.model.schema import CLIENT_IO, JOBS
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.io500 import BASE, write_run

LATENCY = 250e-6  # s per call
RATE = 2.0 * 2**30  # bytes/s


def _calls(job: str, rng: np.random.Generator, n: int, noise: float, sizes=None) -> pa.Table:
    """`n` records of MPI-IO calls costing LATENCY + size / RATE each (times `noise`
    jitter), and the POSIX calls under them (a third of the time: not the application's
    calls, so not what the model reads)."""
    sizes = rng.choice(sizes or [4096, 65536, 2**20, 4 * 2**20], n)
    counts = rng.integers(1, 200, n)
    dur = counts * (LATENCY + sizes / RATE) * rng.normal(1.0, noise, n)
    t0 = datetime(2025, 1, 1)
    rows = []
    for layer in ("posix", "mpiio"):
        for i in range(n):
            rows.append({
                "job_id": job, "node": "n1", "rank": i % 4, "pid": 100 + i % 4,
                "layer": layer, "op": "write" if i % 3 else "read", "file_id": 7,
                "offset": 0, "size": int(sizes[i]), "stride": int(sizes[i]),
                "count": int(counts[i]), "t_start": t0 + timedelta(seconds=i),
                "t_end": t0 + timedelta(seconds=i + 1),
                "dur_ns": int(dur[i] * 1e9 / (3 if layer == "posix" else 1)),
            })  # fmt: skip
    return pa.Table.from_pylist(rows, schema=CLIENT_IO)


def _job(job: str) -> pa.Table:
    return pa.Table.from_pylist(
        [{"job_id": job, "user": "u", "nodes": ["n1"], "start": datetime(2025, 1, 1),
          "end": datetime(2025, 1, 2), "source": "test"}], schema=JOBS
    )  # fmt: skip


@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_call_cost_recovers_the_latency_of_calls_of_known_cost(tmp_path, noise):
    rng = np.random.default_rng(5)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        t = _calls("j1", rng, 400, noise)
        store.append("client_io", t)
        c = savings.call_cost(store, "j1")
    mpi = t.filter(pa.compute.equal(t["layer"], "mpiio"))
    assert c is not None and c.basis == "fitted to the job's calls"
    assert c.calls == pa.compute.sum(mpi["count"]).as_py()  # the application's calls only
    assert c.latency_s == pytest.approx(LATENCY, rel=0.01 + 2 * noise)
    if noise:
        assert c.latency_se_s and 0 < c.latency_se_s < LATENCY / 10
        assert abs(c.latency_s - LATENCY) < 4 * c.latency_se_s


def test_a_job_of_one_size_takes_the_cost_of_a_byte_from_other_jobs(tmp_path):
    """All 4 KiB: latency and transfer cannot be told apart from the job alone; another
    job's calls of several sizes on the same system say what a byte costs."""
    rng = np.random.default_rng(1)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        store.append("client_io", _calls("small", rng, 60, 0.0, sizes=[4096]))
        store.append("jobs", _job("small"))
        alone = savings.call_cost(store, "small")
        store.append("client_io", _calls("other", rng, 200, 0.02))
        helped = savings.call_cost(store, "small")
    assert alone is not None and alone.basis == "all of each call counted"
    assert alone.latency_s == pytest.approx(alone.mean_s)  # an upper bound
    assert alone.latency_s > LATENCY * 1.005
    assert helped is not None and "other jobs" in helped.basis
    assert helped.latency_s == pytest.approx(LATENCY, rel=0.05)


def test_savings_are_clipped_to_the_time_they_come_from():
    est, lo, hi = savings.faster(10.0, 10e9, 1e9, 4e9)
    assert 0.0 == lo < est < hi == pytest.approx(7.5)
    assert est == pytest.approx(5.0)  # log-midpoint: 2 GB/s
    # a "fix" slower than now saves nothing, never negative; nothing saves more than all
    assert savings.saving_of(10.0, (12.0, 15.0, -3.0)) == (0.0, 0.0, 10.0)


def test_every_job_finding_carries_a_saving_inside_its_range(sim_db):
    codes = {r.code for r in JOB_RULES}
    with sim_db.store() as store:
        rows = store.query(
            "SELECT f.subject_id, f.code, f.gain, s.io_time_s, j.nprocs, j.nodes FROM findings f "
            "JOIN job_summaries s ON s.job_id = f.subject_id JOIN jobs j USING (job_id) "
            "WHERE f.subject_kind = 'job'"
        ).to_pylist()
    mine = [r for r in rows if r["code"] in codes]
    assert len(mine) >= 20 and {r["code"] for r in mine} >= {"IOL001", "IOL004", "IOL006"}
    for r in mine:
        g = json.loads(r["gain"])
        lo, hi = g["range_s"]
        assert 0 <= lo <= g["seconds"] <= hi, (r["code"], g)
        # a fix saves at most the job's I/O time (IOL006: its slow phases' time; IOL007:
        # its wall-clock time at the servers, bound by the run time)
        if r["code"] not in ("IOL006", "IOL007"):
            assert hi <= r["io_time_s"] + 0.1, (r["code"], g, r["io_time_s"])
        cores = r["nprocs"] or len(r["nodes"])
        assert g["cores"] == cores
        # both rounded to 3 significant digits, core-hours from the unrounded seconds
        assert g["core_hours"] == pytest.approx(g["seconds"] * cores / 3600, rel=0.01, abs=1e-3)
        assert g["model"]


def test_a_jobs_findings_come_largest_saving_first(sim_db):
    with sim_db.store() as store:
        many = (
            store.query(
                "SELECT subject_id FROM findings WHERE subject_kind = 'job' "
                "GROUP BY subject_id HAVING count(*) >= 2 ORDER BY subject_id"
            )
            .column("subject_id")
            .to_pylist()
        )
        assert many
        for job in many:
            found = report.build(store, job).findings
            secs = [(f["gain"] or {}).get("seconds", -1.0) for f in found]
            assert secs == sorted(secs, reverse=True), (job, secs)


def test_io500_box_is_scaled_to_the_jobs_nodes(sim_db, tmp_path):
    path = tmp_path / "copy.duckdb"
    shutil.copy(sim_db.path, path)
    root = tmp_path / "runs"
    write_run(root / "r1", BASE, nodes=64)
    with DuckDBStore(path) as store:
        assert io500.import_paths(store, [root]).errors == []
        box = savings.io500_box(store)
        job = store.query(
            "SELECT job_id FROM jobs WHERE len(nodes) BETWEEN 1 AND 63 LIMIT 1"
        ).to_pylist()[0]["job_id"]
        rep = report.build(store, job)
        ctx = savings.context(store, rep, box)
    assert box is not None and box["nodes"] == 64
    easy = np.sqrt(BASE["ior-easy-write"] * BASE["ior-easy-read"]) * 2**30
    assert box["easy_bw"] == pytest.approx(easy, rel=1e-6)
    assert ctx.capacity.easy_bw == pytest.approx(easy * rep.nodes / 64, rel=1e-6)
    assert ctx.capacity.ceiling() <= ctx.capacity.easy_bw


def test_seff_sums_the_top_findings_savings_over_the_users_runs(sim_db):
    with sim_db.store() as store:
        rows = store.query(
            'SELECT f.subject_id AS job_id, j."user", j.app FROM findings f '
            "JOIN jobs j ON j.job_id = f.subject_id WHERE f.code = 'IOL004'"
        ).to_pylist()
        # a job whose user ran the app with this finding more than once
        by = {}
        for r in rows:
            by.setdefault((r["user"], r["app"]), []).append(r["job_id"])
        group = max(by.values(), key=len)
        job = max(group)
        s = seff(store, job, runs=1000)
        rep = report.build(store, job)
    assert s["io_time_s"] <= s["runtime_s"]
    assert s["io_share"] == pytest.approx(s["io_time_s"] / s["runtime_s"], abs=1e-3)
    assert s["io_core_hours"] == pytest.approx(s["io_time_s"] * s["cores"] / 3600, abs=1e-2)
    top = s["top"]
    best = max(rep.findings, key=lambda f: (f["gain"] or {}).get("seconds", -1))
    assert top["code"] == best["code"] and top["seconds"] == best["gain"]["seconds"]
    h = s["history"]
    assert h["runs_with_finding"] >= 1 and h["core_hours"] >= top["core_hours"] - 1e-3
    lo, hi = h["core_hours_range"]
    assert lo <= h["core_hours"] <= hi
    assert f"job {job}" in line(s) and top["code"] in line(s)


def test_seff_command(sim_db):
    job = json.loads(run_cli("jobs", "--db", str(sim_db.path), "--json").stdout)[0]["job_id"]
    res = run_cli("seff", job, "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["job_id"] == job
    one = run_cli("seff", job, "--db", str(sim_db.path), "--line")
    assert one.returncode == 0 and one.stdout.count("\n") == 1
    bad = run_cli("seff", "no-such-job", "--db", str(sim_db.path))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "no-such-job" in bad.stderr


def test_seff_measures_a_running_job_up_to_now():
    """An srun epilog asks while the job still runs: the run so far, not "?"."""
    from datetime import datetime

    from iolens.analyze.seff import _so_far

    start = datetime(2026, 12, 6, 5, 0, 0)
    now = datetime(2026, 12, 6, 5, 2, 30)
    assert _so_far(start, None, now) == 150.0
    assert _so_far(start, datetime(2026, 12, 6, 5, 1), now) == 0.0  # ended: its own run time
    assert _so_far(None, None, now) == 0.0
    s = {"job_id": "7", "io_time_s": 30.0, "io_share": 0.2, "running": True,
         "io_core_hours": 0.01, "top": None, "history": None}  # fmt: skip
    assert "(20% of the run so far)" in line(s)
    assert "(20% of the run)" in line({**s, "running": False})


def _run_of(job: str, start: datetime, procs: int, shared: bool, secs: float) -> list[pa.Table]:
    """A job of `procs` processes each writing 64 MiB in 1 MiB calls, to one shared file
    or each to its own, every process's writes taking `secs`."""
    rows = [
        {"job_id": job, "node": f"n{p // 8}", "rank": p, "pid": 1000 + p, "layer": "posix",
         "op": "write", "file_id": 500 if shared else 600 + p, "offset": 0, "size": 2**20,
         "stride": 2**20, "count": 64, "t_start": start + timedelta(seconds=1),
         "t_end": start + timedelta(seconds=1 + secs), "dur_ns": int(secs * 1e9)}
        for p in range(procs)
    ]  # fmt: skip
    jobs = pa.Table.from_pylist(
        [{"job_id": job, "user": "u", "app": "sim", "nodes": ["n0"], "nprocs": procs,
          "start": start, "end": start + timedelta(seconds=secs + 5), "state": "COMPLETED",
          "source": "test"}], schema=JOBS
    )  # fmt: skip
    return [jobs, pa.Table.from_pylist(rows, schema=CLIENT_IO)]


def test_n1_saving_comes_from_the_users_earlier_runs_in_another_mode(tmp_path):
    """IOL001 with no IO500 box and no component peaks: the rate the same application got
    with files per process at the same scale is what the fix is worth. Planted: 32
    processes x 64 MiB in 6 s per process with a file each, 18 s to one shared file;
    a 16-process run (another scale) and a later run (not earlier) are not evidence."""
    from iolens.analyze.pipeline import analyze_jobs

    t0 = datetime(2025, 3, 1)
    runs = {
        "nn-32": (t0, 32, False, 6.0),
        "nn-16": (t0 + timedelta(minutes=5), 16, False, 1.0),
        "n1-32": (t0 + timedelta(minutes=10), 32, True, 18.0),
        "nn-later": (t0 + timedelta(minutes=20), 32, False, 2.0),
    }
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        for job, args in runs.items():
            jobs, calls = _run_of(job, *args)
            store.append("jobs", jobs)
            store.append("client_io", calls)
        found = {(f.subject_id, f.code): f for f in analyze_jobs(store, list(runs))}
        rep = report.build(store, "n1-32")
    assert rep.io_mode == "N-1" and rep.io_procs == 32
    gain = found[("n1-32", "IOL001")].gain
    assert gain["inputs"]["earlier_runs"] == 1
    # 18 s at a third of the earlier rate: 12 s saved (3 significant digits)
    assert gain["seconds"] == pytest.approx(12.0, rel=0.01)
    assert "1 earlier N-N run(s) of sim with 32 processes" in gain["model"]
