"""A job that breaks an analysis (issue 19): it used to be retried on every read (and one
such job once broke every job list). Now its error is recorded on the job, shown on its
page, by `iolens job` and the REST endpoint, the job stays in lists, and reads do not
run the analysis again until the job's data changes or someone asks (`iolens analyze`).

No real trigger is left (the NULL-start one is fixed), so the test makes one analysis
step raise for one real job: the per-job phase detection, patched in this process only.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

import iolens.analyze.jobs as jobs_diag
from iolens.analyze.pipeline import analyze_jobs
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import CLIENT_IO, JOBS
from iolens.present.scheduling import ended_unanalyzed_jobs
from iolens.present.web.app import create_app
from iolens.store import DuckDBStore, queries
from tests.conftest import run_cli

T0 = datetime(2025, 3, 3, 8)


def _batch(job_id: str, key: str, first: int, n: int = 3) -> Batch:
    job = {"job_id": job_id, "user": "eve", "app": "x", "nodes": ["n1"], "nprocs": 1,
           "start": T0, "end": T0 + timedelta(minutes=5), "state": "COMPLETED",
           "source": "slurm-hook"}  # fmt: skip
    io = [
        {"job_id": job_id, "node": "n1", "rank": 0, "pid": 1, "layer": "posix", "op": "write",
         "file_id": 1, "offset": i * 4096, "size": 4096, "stride": None, "count": 1,
         "t_start": T0 + timedelta(seconds=i), "t_end": T0 + timedelta(seconds=i, milliseconds=5),
         "dur_ns": 5_000_000}
        for i in range(first, first + n)
    ]  # fmt: skip
    return Batch(
        source="test",
        key=key,
        jobs=pa.Table.from_pylist([job], schema=JOBS),
        client_io=pa.Table.from_pylist(io, schema=CLIENT_IO),
    )


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Phase detection raises for job "bad"; returns the jobs it was run on, in order."""
    calls: list[str] = []
    real = jobs_diag._detect

    def detect(rep: Any, spans: Any) -> Any:
        calls.append(rep.job_id)
        if rep.job_id == "bad":
            raise ValueError("zip() argument 2 is shorter than argument 1")
        return real(rep, spans)

    monkeypatch.setattr(jobs_diag, "_detect", detect)
    return calls


def test_a_failing_analysis_is_recorded_shown_and_not_retried(
    tmp_path: Path, broken: list[str]
) -> None:
    db = tmp_path / "s.duckdb"
    with DuckDBStore(db) as store:
        for j in ("a", "bad", "c"):
            load(store, _batch(j, f"k-{j}", 0))
    token = json.loads(run_cli("user", "add", "root", "--admin", "--db", str(db), "--json").stdout)
    auth = {"Authorization": f"Bearer {token['token']}"}
    with DuckDBStore(db) as store, TestClient(create_app(store, [])) as client:
        listed = client.get("/api/v1/jobs", headers=auth)  # analyses the new jobs
        assert listed.status_code == 200
        assert {r["job_id"]: r["write_bytes"] for r in listed.json()} == {
            "a": 3 * 4096, "bad": None, "c": 3 * 4096
        }  # fmt: skip
        tried = broken.count("bad")
        assert tried >= 1
        for _ in range(3):  # reads: the job page, the REST job, the lists
            page = client.get("/jobs/bad", headers=auth)
            assert page.status_code == 200
            assert "analysis failed: diagnosis: ValueError: zip() argument 2" in page.text
            rest = client.get("/api/v1/jobs/bad", headers=auth).json()
            assert rest["analysis_errors"][0]["message"].startswith("analysis failed: diagnosis")
            assert rest["write_bytes"] == 3 * 4096  # the report itself is still served
            assert client.get("/api/jobs", headers=auth).status_code == 200
            assert client.get("/jobs", headers=auth).status_code == 200
        assert broken.count("bad") == tried  # not retried by any read
        assert client.get("/api/v1/jobs/a", headers=auth).json()["analysis_errors"] == []
        row = store.query("SELECT * FROM analysis_errors").to_pylist()
        assert [(r["job_id"], r["analysis"]) for r in row] == [("bad", "diagnosis")]
        assert row[0]["iolens_version"] and row[0]["failed_at"] and row[0]["data_stamp"]
        # the server's scheduler leaves it alone too
        assert "bad" not in ended_unanalyzed_jobs(store, T0 + timedelta(days=1), 30)

    # another process (no patch): it reads the recorded error and does not re-analyse
    shown = run_cli("job", "bad", "--db", str(db))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "analysis failed: diagnosis: ValueError" in shown.stdout
    listed_cli = json.loads(run_cli("jobs", "--db", str(db), "--json").stdout)
    assert {r["job_id"] for r in listed_cli} == {"a", "bad", "c"}
    with DuckDBStore(db) as store:
        assert queries.unanalyzed_jobs(store) == []
        assert store.query("SELECT count(*) FROM job_summaries WHERE job_id = 'bad'").column(
            0
        ).to_pylist() == [0]


def test_new_data_or_an_explicit_analysis_retries_it(tmp_path: Path, broken: list[str]) -> None:
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        for j in ("a", "bad"):
            load(store, _batch(j, f"k-{j}", 0))
        analyze_jobs(store, queries.unanalyzed_jobs(store))
        first = broken.count("bad")
        assert queries.unanalyzed_jobs(store) == []
        load(store, _batch("a", "k-a2", 10))  # another job's data: still not retried
        assert queries.unanalyzed_jobs(store) == []
        load(store, _batch("bad", "k-bad2", 10))  # a new batch for the job: retried
        assert queries.unanalyzed_jobs(store) == ["bad"]
        analyze_jobs(store, queries.unanalyzed_jobs(store))
        assert broken.count("bad") == first + 1
        analyze_jobs(store, ["bad"])  # `iolens analyze`: always tries
        assert broken.count("bad") == first + 2
        assert store.query("SELECT count(*) FROM analysis_errors").column(0).to_pylist() == [1]


def test_a_rule_that_raises_costs_that_rule_on_that_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iolens.analyze.findings import JOB_RULES

    rule = JOB_RULES[0]
    real = rule.check

    def check(self: Any, rep: Any) -> Any:
        if rep.job_id == "bad":
            raise KeyError("io_mode")
        return real(self, rep)

    monkeypatch.setattr(rule, "check", check)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        for j in ("a", "bad"):
            load(store, _batch(j, f"k-{j}", 0))
        analyze_jobs(store)
        errors = store.query("SELECT job_id, analysis, error FROM analysis_errors").to_pylist()
        summaries = store.query("SELECT job_id FROM job_summaries ORDER BY 1").column(0)
    assert errors == [{"job_id": "bad", "analysis": rule.code, "error": "KeyError: 'io_mode'"}]
    assert summaries.to_pylist() == ["a", "bad"]  # analysed, less that rule


def test_a_job_whose_report_cannot_be_built_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the report itself fails on the job's data, its page and REST endpoint answer
    "analysis failed: report: ..." (was a bare 500), and the other jobs are served."""
    from iolens.analyze import report

    real = report.build

    def build(store: Any, job_id: str, *a: Any, **kw: Any) -> Any:
        if job_id == "bad":
            raise ZeroDivisionError("division by zero")
        return real(store, job_id, *a, **kw)

    monkeypatch.setattr(report, "build", build)
    db = tmp_path / "s.duckdb"
    with DuckDBStore(db) as store:
        for j in ("a", "bad"):
            load(store, _batch(j, f"k-{j}", 0))
    token = json.loads(run_cli("user", "add", "root", "--admin", "--db", str(db), "--json").stdout)
    auth = {"Authorization": f"Bearer {token['token']}"}
    with DuckDBStore(db) as store, TestClient(create_app(store, [])) as client:
        for path in ("/api/v1/jobs/bad", "/api/jobs/bad"):
            res = client.get(path, headers=auth)
            assert res.status_code == 500
            assert res.json()["detail"] == (
                "job bad: analysis failed: report: ZeroDivisionError: division by zero"
            )
        page = client.get("/jobs/bad", headers=auth)
        assert page.status_code == 500 and "analysis failed: report" in page.text
        assert client.get("/jobs/a", headers=auth).status_code == 200
