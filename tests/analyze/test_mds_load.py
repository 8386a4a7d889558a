"""The MDS load split of `iolens load` (Beacon Figure 10b) on the rows the Lustre agent writes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from iolens.analyze.jobids import save_job_scheme
from iolens.analyze.system import mds_load
from iolens.model.schema import COMPONENTS, SERVER_SAMPLES
from iolens.store import DuckDBStore
from tests.conftest import run_cli

T0 = datetime(2025, 1, 6, 8, 0)
MDT = "fs-MDT0000"


def row(minute: int, kind: str, comp: str, job: str | None, ops: int) -> dict[str, Any]:
    return {
        "ts": T0 + timedelta(minutes=minute),
        "interval_s": 60.0,
        "kind": kind,
        "component_id": comp,
        "job_id": job,
        "md_ops": ops,
    }


@pytest.fixture
def store(tmp_path):
    """Two hours of one MDT: job 4101 from two hosts (`%j.%H` ids), a `find.1003` on the
    login node, ops with no jobstats entry, per-client exports, and an MDS service row
    carrying md_ops (as the old simulator wrote) that must not count."""
    rows = []
    for m in range(1, 121):
        find = 9_000 if 30 < m <= 50 else 0
        rows += [
            row(m, "mdt", MDT, None, 1_000 + 500 + find + 100 + 50),
            row(m, "mdt", MDT, "4101.c001", 600),
            row(m, "mdt", MDT, "4101.c002", 400),
            row(m, "mdt", MDT, "bash.1001", 500),
            row(m, "mdt", MDT, "find.1003", find),
            row(m, "mdt", MDT, "SLURM_JOB77:0:c002", 50),
            row(m, "mdt_client", f"{MDT}:10.0.0.1@o2ib", None, 1_050),
            row(m, "mdt_client", f"{MDT}:10.0.9.1@o2ib", None, 500 + find + 100),
            row(m, "mds", "mds1", None, 99_999),  # no real source puts md_ops under `mds`
        ]
    s = DuckDBStore(tmp_path / "mds.duckdb")
    s.append("server_samples", pa.Table.from_pylist(rows, schema=SERVER_SAMPLES))
    comp = {"component_id": MDT, "kind": "mdt", "parent": "mds1", "peak_bw": None}
    s.append("components", pa.Table.from_pylist([{**comp, "peak_ops": 500.0}], schema=COMPONENTS))
    yield s
    s.close()


def test_processes_outside_jobs_are_untagged_not_jobs(store):
    v = mds_load(store)
    find_ops = 20 * 9_000
    assert v.components == [MDT]
    assert v.total_ops == 120 * 1_650 + find_ops
    assert v.job_ops == 120 * 1_000  # both hosts' entries of job 4101, nothing else
    # bash.1001, find.1003, and SLURM_JOB77:0:c002 (a process name under %e:%u:%H
    # until the site says otherwise)
    assert v.untagged_ops == 120 * 550 + find_ops
    assert v.unattributed_ops == 120 * 100  # no jobstats entry at all
    assert v.job_ops + v.untagged_ops + v.unattributed_ops == v.total_ops
    assert v.other_ops == v.total_ops - v.job_ops
    for b in v.bins:
        assert b.job_ops + b.untagged_ops + b.unattributed_ops == b.total_ops
    assert [j["job_id"] for j in v.top_jobs] == ["4101"]
    top = v.top_untagged[0]
    assert (top["job_id"], top["process"], top["uid"]) == ("find.1003", "find", 1003)
    assert v.top_untagged[1]["process"] == "bash"
    assert [c["nid"] for c in v.top_clients] == ["10.0.9.1@o2ib", "10.0.0.1@o2ib"]
    assert v.capacity == 500.0 and v.capacity_source == "benchmark"
    storm_hour = v.bins[0]
    assert storm_hour.untagged_ops > storm_hour.job_ops


def test_the_site_scheme_decides_what_is_a_job(store):
    """A site whose jobid_name is SLURM_JOB%j:%u:%H says so once; history is re-read."""
    before = mds_load(store)
    save_job_scheme(store, ["SLURM_JOB%j:%u:%H"])
    after = mds_load(store)
    assert after.job_ops == before.job_ops + 120 * 50
    assert after.untagged_ops == before.untagged_ops - 120 * 50
    assert [j["job_id"] for j in after.top_jobs] == ["4101", "77"]


def test_cli_load_prints_the_split(store, tmp_path):
    store.close()
    res = run_cli("load", "--db", str(tmp_path / "mds.duckdb"))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "processes outside any job" in text and "find (uid 1003)" in text
    assert "10.0.9.1@o2ib" in text
