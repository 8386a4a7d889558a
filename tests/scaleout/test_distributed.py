"""Dask (a real LocalCluster, worker processes) gives the embedded run's results.

The dataset is compacted first, so the workers read second-pass client records: the
expansion must be invisible to the analyses too.
"""

from __future__ import annotations

import json
import math
from datetime import datetime

import pytest

from iolens.analyze.distributed import analyze_distributed, slurm_cluster
from iolens.analyze.pipeline import analyze_all
from iolens.present import views
from iolens.store import DuckDBStore
from iolens.store.compaction import compact
from iolens.store.dataset import DatasetStore
from iolens.store.site_config import RetentionSection
from tests.conftest import run_cli
from tests.scaleout.conftest import copy_dataset

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow

VOLATILE = {"created", "analyzed"}


def canon(x, digits: int = 9):
    """JSON-able value with floats rounded to `digits` significant digits."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}") if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {k: canon(v, digits) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list | tuple):
        return [canon(v, digits) for v in x]
    if isinstance(x, datetime):
        return x.isoformat()
    return x


def table(store, name: str) -> list[str]:
    out = []
    for r in store.query(f"SELECT * FROM {name}").to_pylist():
        if isinstance(r.get("evidence"), str):
            r["evidence"] = json.loads(r["evidence"])
        out.append(json.dumps(canon(r), sort_keys=True, default=str))
    return sorted(out)


def reports(store) -> dict:
    ids = store.query("SELECT job_id FROM jobs ORDER BY job_id").column("job_id").to_pylist()
    return {j: canon(json.loads(json.dumps(views.job(store, j), default=str))) for j in ids}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


def test_dask_gives_the_embedded_results(site, dataset, tmp_path, cluster):
    base = copy_dataset(dataset, tmp_path / "base")
    compact(
        base, RetentionSection(settle_s=0, grace_s=0, full_days=100_000), now=datetime(2030, 1, 1)
    )
    embedded = copy_dataset(base, tmp_path / "embedded")
    on_dask = copy_dataset(base, tmp_path / "dask")
    with DatasetStore(embedded) as store:
        analyze_all(store)
        expected = {
            t: table(store, t)
            for t in ("anomalies", "interference", "job_summaries", "findings", "job_phases")
        }
        expected_reports = reports(store)
    with distributed.Client(cluster) as client, DatasetStore(on_dask) as store:
        run = analyze_distributed(store, client, chunk_jobs=8)
        got = {t: table(store, t) for t in expected}
        got_reports = reports(store)
    assert run.tasks["reports"] >= 2 and run.tasks["detectors"] == 5
    assert run.windows >= 2  # bursts crossing window edges are in the comparison
    assert expected["anomalies"] and expected["interference"]  # something to compare
    for t, rows in expected.items():
        assert got[t] == rows, t
    assert got_reports == expected_reports
    # ... and both are what the single DuckDB file gives.
    ref_path = tmp_path / "ref.duckdb"
    ref_path.write_bytes(site.reference.read_bytes())
    with DuckDBStore(ref_path, create=False) as ref:
        analyze_all(ref)
        assert table(ref, "interference") == expected["interference"]
        assert table(ref, "anomalies") == expected["anomalies"]
        assert reports(ref) == expected_reports


def test_the_cli_runs_on_a_dask_scheduler(dataset, tmp_path, cluster):
    root = copy_dataset(dataset, tmp_path / "ds")
    res = run_cli("analyze", "--db", str(root), "--dask", cluster.scheduler_address, "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["tasks"]["detectors"] == 5 and out["anomalies"] > 0
    with DatasetStore(root, read_only=True) as store:
        assert (
            store.query("SELECT count(*) AS n FROM job_summaries").to_pylist()[0]["n"]
            == out["jobs"]
        )
    DuckDBStore(tmp_path / "x.duckdb").close()  # one file: workers could not share it
    res = run_cli("analyze", "--db", str(tmp_path / "x.duckdb"), "--dask", "tcp://127.0.0.1:1")
    assert res.returncode == 2 and "dataset" in res.stderr


def test_slurm_workers_run_this_python(monkeypatch, tmp_path):
    pytest.importorskip("dask_jobqueue")
    cluster = slurm_cluster(0, cores=2, memory="4GiB", walltime="01:00:00", queue="batch")
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "#SBATCH -p batch" in script and "#SBATCH -t 01:00:00" in script
    assert "distributed.cli.dask_worker" in script and "--nthreads 2" in script


def test_progress_advances_per_job_while_reports_run(dataset, tmp_path, cluster):
    """`on_step` fires once per job as its report task completes, not all at the end: the
    first call comes before the last report task stops on its worker (Dask's task stream)."""
    import time

    root = copy_dataset(dataset, tmp_path / "steps")
    calls: list[tuple[str, int, int, float]] = []
    with distributed.Client(cluster) as client, DatasetStore(root) as store:
        n = store.query("SELECT count(*) AS n FROM jobs").to_pylist()[0]["n"]
        with distributed.get_task_stream(client) as stream:
            analyze_distributed(
                store,
                client,
                components=False,
                chunk_jobs=1,
                on_step=lambda s, d, t: calls.append((s, d, t, time.time())),
            )
    built = [c for c in calls if c[0] == "building reports"]
    assert [c[1] for c in built] == list(range(1, n + 1)) and {c[2] for c in built} == {n}
    stops = [
        max(s["stop"] for s in t["startstops"] if s["action"] == "compute")
        for t in stream.data
        if str(t["key"]).startswith("reports_task")
    ]
    assert len(stops) == n > 2
    assert built[0][3] < max(stops)  # the bar moved while reports were still running
    assert [c[:3] for c in calls if c[0] == "diagnosing jobs"] == [
        ("diagnosing jobs", 0, 1),
        ("diagnosing jobs", 1, 1),
    ]
