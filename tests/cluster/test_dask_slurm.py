"""`iolens analyze --dask-slurm` on the real Slurm mini cluster (issue 23).

The scale-out tests run the Dask path on a LocalCluster; here dask-jobqueue submits the
workers as Slurm batch jobs to the mini cluster, as a site would on its own. The results
must be what the embedded analysis gives on the same dataset, and the workers must have
run as Slurm jobs on the cluster's nodes (sacct says where).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iolens.analyze.pipeline import analyze_all
from iolens.simulate import SimConfig, simulate
from iolens.store.dataset import DatasetStore
from iolens.store.segments import SegmentWriter
from tests.cluster.harness import NODES, Cluster

pytest.importorskip("dask_jobqueue")
pytestmark = pytest.mark.cluster

TABLES = ("anomalies", "interference", "job_summaries", "findings", "job_phases")


def _dataset(root: Path) -> Path:
    """A small seeded simulation written as a dataset by one segment writer."""
    from bench.scaleout.fleet import agent_batches

    sim = simulate(SimConfig(nodes=64, hours=0.5, seed=11))
    writer = SegmentWriter(root, "g", fsync=False)
    try:
        batches = [b for _g, b in agent_batches(sim, ["g"], max_rows=4000)]
        for i in range(0, len(batches), 64):
            writer.load_many(batches[i : i + 64])
    finally:
        writer.close()
    return root


def test_dask_slurm_workers_give_the_embedded_results(cluster: Cluster, tmp_path: Path):
    from tests.scaleout.test_distributed import table

    base = _dataset(tmp_path / "base")
    embedded = shutil.copytree(base, tmp_path / "embedded")
    on_slurm = shutil.copytree(base, tmp_path / "slurm")
    with DatasetStore(embedded) as store:
        analyze_all(store)
        expected = {t: table(store, t) for t in TABLES}
    assert expected["findings"] and expected["job_summaries"]  # something to compare

    res = subprocess.run(
        [sys.executable, "-m", "iolens", "analyze", "--db", str(on_slurm), "--dask-slurm",
         "--workers", "2", "--worker-cores", "1", "--worker-memory", "900MiB", "--json"],
        env=cluster.env, cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    with DatasetStore(on_slurm, read_only=True) as store:
        got = {t: table(store, t) for t in TABLES}
    assert out["jobs"] == len(expected["job_summaries"])
    for t, rows in expected.items():
        assert got[t] == rows, t

    acct = subprocess.run(
        ["sacct", "-a", "-n", "-X", "-P", "-S", "now-1hour", "-o", "JobID,JobName,NodeList,State"],
        env=cluster.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    rows = [line.split("|") for line in acct.stdout.splitlines() if line.strip()]
    rows = [r for r in rows if r[1] == "dask-worker"]  # dask-jobqueue names its jobs
    assert rows, acct.stdout + acct.stderr
    ran = [r for r in rows if r[2] in NODES]
    assert ran, rows  # the workers were Slurm jobs on the cluster's nodes
