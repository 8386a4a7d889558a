"""The CLI contract: documented JSON keys, clear one-line errors, no tracebacks."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_cli

JOBS_KEYS = {"job_id", "user", "app", "start", "end", "io_mode"}
JOB_KEYS = {
    "job_id",
    "user",
    "io_mode",
    "read_bytes",
    "write_bytes",
    "read_bw_avg",
    "write_bw_avg",
    "bandwidth",
    "iops_avg",
    "md_ops",
    "md_ops_rate",
    "io_procs",
    "io_nodes",
    "forwarders",
    "osts",
    "findings",
}


def test_jobs_json(sim_db):
    res = run_cli("jobs", "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert len(rows) == len(sim_db.truth["jobs"])
    for row in rows:
        assert set(row) >= JOBS_KEYS
        assert row["io_mode"] == sim_db.truth["jobs"][row["job_id"]]["io_mode"]


def test_listings_with_nothing_to_analyse_leave_the_analyses_unloaded(sim_db):
    """Asking whether a job needs analysing must not load the analyses (scikit-learn and
    SciPy take most of a second): `iolens jobs` on an analysed store imports neither."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from iolens.present.cli.main import main\n"
        f"sys.argv = ['iolens', 'jobs', '--db', {str(sim_db.path)!r}, '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('sklearn', 'scipy', 'iolens.analyze.pipeline') "
        "if m in sys.modules), file=sys.stderr)\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout), "the listing printed no job"
    assert res.stderr.strip().splitlines()[-1] == "[]"


def test_jobs_filter_by_user(sim_db):
    res = run_cli("jobs", "--db", str(sim_db.path), "--json", "--user", "carol")
    rows = json.loads(res.stdout)
    expected = {j for j, t in sim_db.truth["jobs"].items() if t["user"] == "carol"}
    assert {r["job_id"] for r in rows} == expected and expected


def test_job_json(sim_db):
    job_id = next(iter(sim_db.truth["jobs"]))
    res = run_cli("job", job_id, "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert set(rep) >= JOB_KEYS
    t = sim_db.truth["jobs"][job_id]
    assert (rep["read_bytes"], rep["write_bytes"], rep["io_mode"]) == (
        t["read_bytes"],
        t["write_bytes"],
        t["io_mode"],
    )
    assert isinstance(rep["findings"], list)


def test_job_human_output(sim_db):
    job_id = next(iter(sim_db.truth["jobs"]))
    res = run_cli("job", job_id, "--db", str(sim_db.path))
    assert res.returncode == 0
    assert f"Job {job_id}" in res.stdout and "Bytes seen at each layer" in res.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["job", "424242"], "job 424242 is not in"),
        (["jobs"], None),
    ],
)
def test_user_mistakes_are_one_clear_line(sim_db, tmp_path, args, message):
    if message is None:  # missing database
        args = [*args, "--db", str(tmp_path / "missing.duckdb")]
        message = "no iolens database at"
    else:
        args = [*args, "--db", str(sim_db.path)]
    res = run_cli(*args)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_corrupt_db_is_one_clear_line(tmp_path):
    bad = tmp_path / "bad.duckdb"
    bad.write_text("garbage")
    res = run_cli("jobs", "--db", str(bad), "--json")
    assert res.returncode == 2 and str(bad) in res.stderr and res.stdout == ""
    assert "Traceback" not in res.stderr


def test_import_trace_of_a_folder_without_traces_is_an_error(tmp_path):
    """A wrong folder must not look like a successful import of nothing."""
    (tmp_path / "spool").mkdir()
    (tmp_path / "spool" / "notes.txt").write_text("not a trace")
    db = tmp_path / "t.duckdb"
    res = run_cli("import", "trace", str(tmp_path / "spool"), "--db", str(db))
    assert res.returncode == 2, res.stdout
    assert "no *.iolens trace files found" in res.stderr and str(tmp_path / "spool") in res.stderr
    assert "Traceback" not in res.stderr


def test_db_from_environment(sim_db):
    import os

    env = {**os.environ, "IOLENS_DB": str(sim_db.path)}
    res = run_cli("jobs", "--json", "--limit", "3", env=env)
    assert res.returncode == 0 and len(json.loads(res.stdout)) == 3


def test_simulate_writes_truth(tmp_path):
    truth = tmp_path / "truth.json"
    db = tmp_path / "s.duckdb"
    res = run_cli(
        "simulate",
        "--db",
        str(db),
        "--nodes",
        "64",
        "--hours",
        "0.3",
        "--seed",
        "5",
        "--truth",
        str(truth),
        "--json",
    )
    assert res.returncode == 0, res.stderr
    gt = json.loads(truth.read_text())
    assert set(gt) >= {"jobs", "faults", "interference"}
    for job in gt["jobs"].values():
        assert job["io_mode"] in {"N-N", "N-1", "N-M", "1-1"}
        assert isinstance(job["read_bytes"], int) and isinstance(job["write_bytes"], int)
    for fault in gt["faults"]:
        assert {"kind", "component", "start", "end"} <= set(fault)
    listed = json.loads(run_cli("jobs", "--db", str(db), "--json").stdout)
    assert {r["job_id"] for r in listed} == set(gt["jobs"])


def test_help_lists_commands():
    res = run_cli("--help")
    for cmd in ("simulate", "jobs", "job", "demo", "analyze"):
        assert cmd in res.stdout


def test_demo_runs_and_matches_ground_truth(tmp_path):
    res = run_cli("demo", "--db", str(tmp_path / "demo.duckdb"))
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    m = re.search(r"I/O mode right for (\d+)/(\d+) jobs, byte counts exact for (\d+)/(\d+)", out)
    assert m, out[-2000:]
    right, total, exact, total2 = map(int, m.groups())
    assert right == total == exact == total2 > 50
    assert "Per-job report of job" in out and "Findings by rule" in out


def test_job_layers_carry_the_same_bytes_at_every_layer(sim_db):
    """The planted N-1 culprit moves its bytes through compute, forwarder and OSTs alike."""
    job_id = "100001"
    res = run_cli("job", job_id, "--db", str(sim_db.path), "--json", "--layers")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    series = rep["layer_series"]
    truth = sim_db.truth["jobs"][job_id]
    for layer in ("compute", "forwarder", "ost"):
        for op in ("read", "write"):
            got = sum(series["layers"][layer][f"{op}_bytes"])
            assert got == pytest.approx(truth[f"{op}_bytes"], rel=1e-9), (layer, op)
    assert series["path"]["forwarders"] and series["path"]["osts"]
    human = run_cli("job", job_id, "--db", str(sim_db.path), "--layers")
    assert "Bytes per layer" in human.stdout and "forwarder" in human.stdout


def test_serve_on_a_taken_port_is_one_clear_line(tmp_path):
    """Another process listens there: one line naming the address, exit 2, and no store
    opened (nor created) for nothing."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = tmp_path / "s.duckdb"
        res = run_cli("serve", "--db", str(db), "--port", str(port))
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert not db.exists()
