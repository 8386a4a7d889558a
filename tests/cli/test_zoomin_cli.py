"""`iolens zoomin`: the zoom-in analysis across Darshan logs or a store's jobs (issue 21),
on real logs of ../shared/data/darshan-logs and a real LMT database (skipped when absent).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from iolens.analyze.darshan.zoomin import weather_before
from iolens.ingest.darshan_reader import read_log
from iolens.store import DuckDBStore
from tests.conftest import SHARED_DATA, run_cli

RELEASE = SHARED_DATA / "darshan-logs" / "release_logs"
LOG = RELEASE / "mpi-io-test-x86_64-3.5.0.darshan"
EDISON = SHARED_DATA / "pytokio-lmt-and-lustre-cli" / "snx11025_2018-01-28.sqlite3"


def _need(p: Path) -> Path:
    if not p.exists():
        pytest.skip(f"{p} is not available")
    return p


def test_over_logs() -> None:
    """The 36 release logs: one row each, and the metadata share of the old big-endian ones
    is a share again (it was 8e-303 %, a value read in the wrong byte order)."""
    res = run_cli("zoomin", str(_need(RELEASE)), "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    rows = got["jobs"]
    assert len(rows) == len(list(RELEASE.glob("*.darshan"))) == 36 and got["failed"] == []
    ppc = [r for r in rows if "ppc64" in r["log"]]
    assert len(ppc) == 11 and all(5 < r["mtime_pct"] < 60 for r in ppc)
    assert all(r["mtime_pct"] is None or r["mtime_pct"] >= 1e-3 for r in rows)
    assert all(r["oss_cpu_pct"] is None for r in rows)  # no store: no weather
    corr = {c["factor"]: c for c in got["bandwidth_correlation"]}
    assert corr["mtime_pct"]["jobs"] == 36 and corr["mtime_pct"]["r"] < 0
    assert {g["app"] for g in got["applications"]} == {"mpi-io-test"}


def test_over_a_store_weather_comes_from_lmt_imported_later(tmp_path: Path) -> None:
    """A job imported before the LMT database for its time: `iolens zoomin --db` finds the
    weather the import could not (here the job's start is moved into the database's five
    minutes: no real log of ../shared/data ran then)."""
    db = tmp_path / "s.duckdb"
    res = run_cli("import", "darshan", str(_need(LOG)), "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    res = run_cli(
        "import", "lmt", str(_need(EDISON)), "--tz", "America/Los_Angeles", "--db", str(db)
    )
    assert res.returncode == 0, res.stderr
    start = datetime(2018, 1, 28, 8, 2, 0)  # 00:02 Pacific
    with DuckDBStore(db) as store:
        (job_id,) = store.query("SELECT job_id FROM job_factors").column(0).to_pylist()
        store.execute('UPDATE darshan_logs SET "start" = ? WHERE job_id = ?', [start, job_id])
        # on the OSTs its file is striped over, as the importer sees them (Darshan's indices)
        osts = sorted({int(o) for row in read_log(LOG).lustre["osts"] for o in row})
        expected = weather_before(store, start, osts)
    assert osts == [1] and expected is not None and expected["osts"] == 1
    assert expected["ost_io_mb"] > 0 and expected["oss_cpu_pct"] is not None
    res = run_cli("zoomin", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)["jobs"]
    for k in ("oss_cpu_pct", "mds_cpu_pct", "ost_io_mb"):
        assert row[k] == pytest.approx(expected[k]), k
    assert row["job_id"] == job_id and row["datasize"] == 2 * 64 * 2**20
    res = run_cli("zoomin", "--db", str(db), "--job", "no-such-job")
    assert res.returncode == 2 and "no-such-job" in res.stderr and "Traceback" not in res.stderr


def test_importing_lmt_after_the_logs_diagnoses_them_again(tmp_path: Path) -> None:
    """Two jobs imported before LMT; one started inside the database's five minutes (moved
    there: no real log ran then). `iolens import lmt` diagnoses that one again, so its
    stored factors and findings have the weather (not only what `zoomin` shows), and
    leaves the other alone."""
    db = tmp_path / "s.duckdb"
    other = RELEASE / "mpi-io-test-x86_64-3.4.0.darshan"
    res = run_cli("import", "darshan", str(_need(LOG)), str(other), "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    start = datetime(2018, 1, 28, 8, 2, 0)  # 00:02 Pacific
    inside = read_log(LOG).job_id
    with DuckDBStore(db) as store:
        store.execute('UPDATE darshan_logs SET "start" = ? WHERE job_id = ?', [start, inside])
        before = {
            r["job_id"]: r
            for r in store.query(
                "SELECT job_id, computed, oss_cpu_pct FROM job_factors"
            ).to_pylist()
        }
        n_found = store.query("SELECT count(*) FROM findings WHERE subject_id = ?", [inside])
    assert len(before) == 2 and before[inside]["oss_cpu_pct"] is None
    res = run_cli(
        "import", "lmt", str(_need(EDISON)), "--tz", "America/Los_Angeles", "--db", str(db),
        "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["darshan_jobs_rediagnosed"] == 1
    with DuckDBStore(db) as store:
        osts = sorted({int(o) for row in read_log(LOG).lustre["osts"] for o in row})
        expected = weather_before(store, start, osts)
        after = {r["job_id"]: r for r in store.query("SELECT * FROM job_factors").to_pylist()}
        again = store.query("SELECT count(*) FROM findings WHERE subject_id = ?", [inside])
    assert expected is not None
    for k in ("oss_cpu_pct", "mds_cpu_pct", "ost_io_mb"):
        assert after[inside][k] == pytest.approx(expected[k]), k
    assert after[inside]["computed"] > before[inside]["computed"]
    (other_id,) = set(after) - {inside}
    assert after[other_id]["computed"] == before[other_id]["computed"]
    assert after[other_id]["oss_cpu_pct"] is None
    assert again.column(0).to_pylist() == n_found.column(0).to_pylist()  # replaced, not added
