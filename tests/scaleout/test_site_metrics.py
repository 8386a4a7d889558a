"""`/metrics/site` over a Parquet dataset: the same snapshot as over the DuckDB file loaded
with the same batches (the exporter's SQL runs unchanged on both backends)."""

from __future__ import annotations

import pytest

from iolens.present.monitored import snapshot
from iolens.store import DuckDBStore
from iolens.store.dataset import DatasetStore


def test_the_dataset_exports_what_the_duckdb_file_does(site, dataset):
    with DuckDBStore(site.reference, create=False) as ref:
        # The last samples of a simulation are idle: compare at its busiest moment too.
        busiest = ref.query(
            "SELECT ts FROM server_samples WHERE kind = 'ost' AND job_id IS NULL "
            "ORDER BY read_bytes + write_bytes DESC LIMIT 1"
        ).to_pylist()[0]["ts"]
        want = [snapshot(ref, top_jobs=3, until=t) for t in (busiest, None)]
    with DatasetStore(dataset, read_only=True) as ds:
        got = [snapshot(ds, top_jobs=3, until=t) for t in (busiest, None)]
        again = snapshot(ds, top_jobs=3, hint=got[1].newest)
    assert want[0].newest == busiest and any(c.write_bps for c in want[0].components)
    assert want[0].jobs_busy > 0
    for w, g in zip(want, got, strict=True):
        assert g.newest == w.newest and g.components == w.components
        assert [(j.job_id, j.user) for j in g.jobs] == [(j.job_id, j.user) for j in w.jobs]
        for gj, wj in zip(g.jobs, w.jobs, strict=True):  # sums in another row order
            rates = ("read_bps", "write_bps", "read_iops", "write_iops", "md_ops")
            assert [getattr(gj, r) for r in rates] == pytest.approx(
                [getattr(wj, r) for r in rates], rel=1e-12
            )
        assert g.jobs_busy == w.jobs_busy
        assert g.anomalies == w.anomalies
    assert again.components == want[1].components
