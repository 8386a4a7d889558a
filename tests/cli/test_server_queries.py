"""`--server`: jobs, job and series asked of a running `iolens serve` print exactly what
the same commands print against a copy of its database."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from iolens.present.web.app import create_app
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.loopback import TOKEN, free_port, start_server, stop


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    if Path(f"{src}.wal").exists():
        shutil.copyfile(f"{src}.wal", f"{dst}.wal")
    return dst


@pytest.fixture(scope="module")
def served(sim_db, tmp_path_factory):
    """(server URL, a copy of the DB the server does not hold); the server owns another."""
    d = tmp_path_factory.mktemp("served")
    owned = _copy(sim_db.path, d / "server.duckdb")
    local = _copy(sim_db.path, d / "local.duckdb")
    port = free_port()
    proc = start_server(owned, port, d / "server.log")
    try:
        yield f"http://127.0.0.1:{port}", local
    finally:
        stop(proc)


def _both(served, *args: str) -> tuple[str, str]:
    url, local = served
    remote = run_cli(*args, "--server", url, "--token", TOKEN)
    direct = run_cli(*args, "--db", str(local))
    assert remote.returncode == 0, remote.stderr
    assert direct.returncode == 0, direct.stderr
    return remote.stdout, direct.stdout


def test_jobs_json_and_table_are_identical(served, sim_db):
    remote, direct = _both(served, "jobs", "--json")
    assert remote == direct
    assert len(json.loads(remote)) == len(sim_db.truth["jobs"])
    remote, direct = _both(served, "jobs", "--json", "--user", "carol", "--limit", "3")
    assert remote == direct and len(json.loads(remote)) == 3
    remote, direct = _both(served, "jobs", "--limit", "20")
    assert remote == direct and "Jobs" in remote


def test_job_json_and_report_are_identical(served, sim_db):
    job_id = sorted(sim_db.truth["jobs"])[0]
    remote, direct = _both(served, "job", job_id, "--json")
    assert remote == direct
    assert json.loads(remote)["job_id"] == job_id
    remote, direct = _both(served, "job", job_id)
    assert remote == direct and f"Job {job_id}" in remote


def test_series_is_identical(served):
    remote, direct = _both(served, "series", "--json", "--kind", "ost", "--limit", "500")
    assert remote == direct
    rows = json.loads(remote)
    assert len(rows) == 500 and {r["kind"] for r in rows} == {"ost"}
    # one value per sample: an agent writes a standard reading to `server_samples` (the
    # bytes in the interval) and to `metrics` (its rate); the series shows it once
    keys = [(r["time"], r["component"], r["metric"]) for r in rows]
    assert len(set(keys)) == len(keys)
    start = rows[100]["time"]
    remote, direct = _both(served, "series", "--json", "--since", start, "--limit", "50")
    assert remote == direct and json.loads(remote)[0]["time"] >= start
    remote, direct = _both(served, "series", "--metric", "read_bytes", "--limit", "40")
    assert remote == direct
    # ... and it is the stored bytes of the interval, not the per-second rate
    remote, _ = _both(served, "series", "--json", "--metric", "read_bytes", "--limit", "40")
    with DuckDBStore(served[1], create=False) as store:
        stored = {
            (r["ts"].isoformat() + "Z", r["component_id"]): float(r["read_bytes"])
            for r in store.query(
                "SELECT ts, component_id, read_bytes FROM server_samples "
                "WHERE job_id IS NULL AND read_bytes IS NOT NULL"
            ).to_pylist()
        }
    got = json.loads(remote)
    assert any(r["value"] > 0 for r in got)
    assert all(r["value"] == stored[(r["time"], r["component"])] for r in got)


def test_server_and_token_from_the_environment(served):
    url, local = served
    env = {**os.environ, "IOLENS_SERVER": url, "IOLENS_TOKEN": TOKEN}
    env.pop("IOLENS_DB", None)
    via_env = run_cli("jobs", "--json", "--limit", "5", env=env)
    assert via_env.returncode == 0, via_env.stderr
    # A --db typed on the command line beats a server from the environment.
    typed_db = run_cli("jobs", "--json", "--limit", "5", "--db", str(local), env=env)
    assert typed_db.stdout == via_env.stdout
    both = run_cli("jobs", "--db", str(local), "--server", url)
    assert both.returncode == 2 and "not both" in both.stderr


def _one_error_line(res, text: str) -> None:
    assert res.returncode == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], res.stderr
    assert res.stdout == ""


def test_remote_mistakes_are_one_clear_line(served, tmp_path):
    url, _ = served
    _one_error_line(run_cli("jobs", "--server", url, "--token", "wrong"), "refused the token")
    _one_error_line(run_cli("jobs", "--server", url), "refused the token")
    _one_error_line(
        run_cli("job", "424242", "--server", url, "--token", TOKEN), "job 424242 is not in"
    )
    dead = f"http://127.0.0.1:{free_port()}"
    _one_error_line(
        run_cli("series", "--server", dead, "--token", TOKEN),
        f"cannot reach iolens server at {dead}: ",
    )


# -- the API in-process ---------------------------------------------------------------------
@pytest.fixture
def api(tmp_path):
    store = DuckDBStore(tmp_path / "s.duckdb")
    with TestClient(create_app(store, tokens=["s3cret"])) as c:
        yield c
    store.close()


AUTH = {"Authorization": "Bearer s3cret"}


def test_api_requires_a_token_and_reports_unknown_jobs_as_json(api):
    assert api.get("/api/v1/jobs").status_code == 401
    assert api.get("/api/v1/jobs", headers=AUTH).json() == []
    res = api.get("/api/v1/jobs/nope", headers=AUTH)
    assert res.status_code == 404
    assert res.json()["job_id"] == "nope" and "job nope is not in" in res.json()["detail"]
    res = api.get("/api/v1/series", params={"since": "last week"}, headers=AUTH)
    assert res.status_code == 400 and "span like 2h" in res.json()["detail"]
    assert api.get("/api/v1/series", params={"limit": 0}, headers=AUTH).status_code == 422
