"""A job record without a start (issue 19): an ingest that accepted it once must not break
every job list. It is listed, its I/O analysed, its page served; its history is not judged
(there is no time to place it among earlier runs)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
from fastapi.testclient import TestClient

from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import CLIENT_IO, JOBS
from iolens.present.web.app import create_app
from iolens.store import DuckDBStore
from tests.conftest import run_cli

T0 = datetime(2025, 3, 3, 8)


def _store(path: Path) -> None:
    job = {"job_id": "77", "user": "eve", "app": "x", "nodes": ["n1"], "nprocs": 1,
           "start": None, "end": None, "state": "RUNNING", "source": "slurm-hook"}  # fmt: skip
    io = [
        {"job_id": "77", "node": "n1", "rank": 0, "pid": 1, "layer": "posix", "op": "write",
         "file_id": 1, "offset": i * 4096, "size": 4096, "stride": None, "count": 1,
         "t_start": T0 + timedelta(seconds=i), "t_end": T0 + timedelta(seconds=i, milliseconds=5),
         "dur_ns": 5_000_000}
        for i in range(3)
    ]  # fmt: skip
    with DuckDBStore(path) as store:
        load(
            store,
            Batch(
                source="test",
                key="no-start",
                jobs=pa.Table.from_pylist([job], schema=JOBS),
                client_io=pa.Table.from_pylist(io, schema=CLIENT_IO),
            ),
        )


def test_job_without_start_is_listed_and_served(tmp_path: Path) -> None:
    db = tmp_path / "n.duckdb"
    _store(db)
    res = run_cli("jobs", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    rows = {r["job_id"]: r for r in json.loads(res.stdout)}
    assert rows["77"]["write_bytes"] == 3 * 4096
    token = json.loads(run_cli("user", "add", "root", "--admin", "--db", str(db), "--json").stdout)
    with DuckDBStore(db) as store, TestClient(create_app(store, [])) as client:
        auth = {"Authorization": f"Bearer {token['token']}"}
        assert client.get("/api/jobs", headers=auth).status_code == 200
        assert client.get("/jobs/77", headers=auth).status_code == 200
        assert client.get("/api/jobs/77", headers=auth).json()["write_bytes"] == 3 * 4096
