"""Compaction: merged segments, lossless second pass, downsampling and retention."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from iolens.analyze.components.base import Context
from iolens.analyze.components.slow_ost import io_time_grid
from iolens.collect.sources.lustre_oss import IO_TIME_MEAN, IO_TIME_PREFIX
from iolens.model.batch import Batch
from iolens.store import DuckDBStore
from iolens.store.compaction import MEAN_EVENTS, compact, dataset_bytes, second_pass_ratios
from iolens.store.dataset import DatasetStore
from iolens.store.dataset_layout import MERGED
from iolens.store.segments import SegmentWriter
from iolens.store.site_config import RetentionSection
from iolens.store.visibility import take_snapshot
from tests.scaleout.conftest import copy_dataset
from tests.scaleout.test_dataset_store import rows

NOW = datetime(2030, 1, 1)  # long after the simulated day: every partition has settled
KEEP = RetentionSection(settle_s=0, grace_s=0, full_days=100_000)
CLIENT = (
    'SELECT job_id, node, rank, pid, layer, op, file_id, "offset", size, stride, count, '
    "t_start, t_end, dur_ns FROM client_io ORDER BY ALL"
)


def test_second_pass_is_lossless_and_merges_across_nodes(site, dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    before = dataset_bytes(root)
    report = compact(root, KEEP, now=NOW)
    s = report.summary()["tables"]
    merged = s[f"{MERGED}:second_pass"]
    assert merged["rows_in"] == site.ledger.rows["client_io"]
    assert merged["rows_out"] * 20 < merged["rows_in"]  # many ranks, one row
    after = dataset_bytes(root)
    assert after[MERGED] < before["client_io"] and "client_io" not in after
    snap = take_snapshot(root)
    partitions = Counter(str(Path(f).parent) for files in snap.files.values() for f in files)
    assert max(partitions.values()) == 1  # one file per hour (or group and day)
    with DuckDBStore(site.reference, create=False) as ref, DatasetStore(root, read_only=True) as ds:
        assert ds.query(CLIENT).equals(ref.query(CLIENT))  # row for row
        for table in ("server_samples", "jobs", "files", "components", "forwarding"):
            assert rows(ds, table) == rows(ref, table), table
    # Ran again: nothing left to do.
    assert compact(root, KEEP, now=NOW).units == []
    ratios = {r["app"]: r for r in second_pass_ratios(root)}
    assert sum(r["records"] for r in ratios.values()) == site.ledger.rows["client_io"]
    assert max(r["row_ratio"] for r in ratios.values()) > 10


def test_late_data_is_merged_into_a_compacted_hour(site, dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    compact(root, KEEP, now=NOW)
    late = next(b for _, b in site.batches if b.client_io is not None)
    with SegmentWriter(root, "ga", fsync=False) as w:
        late = Batch("tracer", key="late", client_io=late.client_io)
        w.load_many([late])
    with DatasetStore(root, read_only=True) as ds:
        n = ds.query("SELECT count(*) AS n FROM client_io").to_pylist()[0]["n"]
    assert n == site.ledger.rows["client_io"] + late.client_io.num_rows
    report = compact(root, KEEP, now=NOW)
    assert {u.action for u in report.units} == {"second_pass", "merge"}
    with DatasetStore(root, read_only=True) as ds:
        assert ds.query("SELECT count(*) AS n FROM client_io").to_pylist()[0]["n"] == n


def _minute_grids(root, kinds: list[str]) -> tuple[dict, tuple]:
    """Per kind the detectors' minute grid, and slow_ost's brw_stats I/O time per minute
    (its latency on Lustre 2.10, a mean over the I/Os of each sample, from `metrics`)."""
    with DatasetStore(root, read_only=True) as ds:
        lo, hi = (
            ds.query("SELECT min(ts) AS a, max(ts) AS b FROM server_samples")
            .to_pylist()[0]
            .values()
        )
        ctx = Context(ds, lo, hi + timedelta(minutes=1))
        grids = {kind: ctx.grid(kind) for kind in kinds}
        return grids, io_time_grid(ctx, grids["ost"])


#: Per series and detector minute (`Context.grid`'s bucket): what downsampling must keep.
MINUTE = "(epoch_us(ts) - 1) // 60000000"
COUNTER_MINUTES = (  # metrics with an interval are rates: value x interval is the count
    f"SELECT kind, component_id, job_id, metric, {MINUTE} AS m, sum(value * interval_s) AS n "
    "FROM metrics WHERE interval_s IS NOT NULL AND NOT ends_with(metric, '_us') "
    "GROUP BY ALL ORDER BY ALL"
)


def test_downsampling_keeps_totals_and_the_detectors_minutes(dataset, tmp_path):
    """Agents sample every 10 s; downsampled to 60 s, each series keeps one row per minute,
    every total, and the per-minute grids every component detector builds."""
    root = copy_dataset(dataset, tmp_path / "ds")
    with DatasetStore(root, read_only=True) as ds:
        kinds = ds.query("SELECT DISTINCT kind FROM server_samples").column("kind").to_pylist()
    assert {"ost", "oss", "mdt", "mds", "forwarder"} <= set(kinds)  # what the detectors read
    grids, io_time = _minute_grids(root, kinds)
    assert np.isfinite(io_time[0]).any()  # something to compare
    sql = (
        "SELECT kind, component_id, job_id, sum(read_bytes) AS r, sum(write_bytes) AS w, "
        "sum(md_ops) AS m, sum(interval_s) AS s FROM server_samples GROUP BY ALL ORDER BY ALL"
    )
    series_minutes = (
        f"SELECT count(*) AS n FROM (SELECT DISTINCT kind, component_id, job_id, {MINUTE} "
        "FROM server_samples)"
    )
    with DatasetStore(root, read_only=True) as ds:
        totals = ds.query(sql)
        n = ds.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
        minutes = ds.query(series_minutes).to_pylist()[0]["n"]
        counters = ds.query(COUNTER_MINUTES)
    # Several samples per series minute to fold (most series report every 10-s round).
    assert minutes < n / 3
    report = compact(root, RetentionSection(settle_s=0, grace_s=0, full_days=0), now=NOW)
    assert "server_samples:downsample" in report.summary()["tables"]
    assert "metrics:downsample" in report.summary()["tables"]
    with DatasetStore(root, read_only=True) as ds:
        assert ds.query(sql).equals(totals)
        assert ds.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"] == minutes
        after = ds.query(COUNTER_MINUTES)
    for col in ("kind", "component_id", "job_id", "metric", "m"):
        assert after[col].equals(counters[col]), col
    assert np.allclose(after["n"].to_numpy(), counters["n"].to_numpy(), rtol=1e-9)
    down, io_time_down = _minute_grids(root, kinds)
    assert np.allclose(io_time_down[1], io_time[1], rtol=1e-9)  # I/Os per minute
    assert np.allclose(io_time_down[0], io_time[0], rtol=1e-9, equal_nan=True)  # their mean
    for kind in kinds:
        for name in ("seconds", "read_bytes", "write_bytes", "read_ops", "md_ops"):
            assert np.array_equal(getattr(down[kind], name), getattr(grids[kind], name)), name
        for name in ("svc", "wait", "queue", "threads"):
            a, b = getattr(down[kind], name), getattr(grids[kind], name)
            assert np.allclose(a, b, equal_nan=True), (kind, name)


def test_downsampling_weights_the_means_the_sources_write():
    """The store may not import the sources: its names for a mean and its events are theirs."""
    assert MEAN_EVENTS == {IO_TIME_MEAN: IO_TIME_PREFIX}


def test_retention_drops_expired_hours(dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    report = compact(root, RetentionSection(settle_s=0, grace_s=0, keep_days=1), now=NOW)
    assert {u.action for u in report.units} >= {"drop"}
    with DatasetStore(root, read_only=True) as ds:
        for table in ("server_samples", "client_io"):
            assert ds.query(f"SELECT count(*) AS n FROM {table}").to_pylist()[0]["n"] == 0
        assert ds.query("SELECT count(*) AS n FROM jobs").to_pylist()[0]["n"] > 0  # kept


def test_replaced_segments_wait_out_their_grace(dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    raw = take_snapshot(root).files["client_io"]
    compact(root, RetentionSection(settle_s=0, grace_s=3600, full_days=100_000), now=NOW)
    assert all((root / f).exists() for f in raw)  # still there for readers that listed them
    with DatasetStore(root, read_only=True) as ds:  # ... but not read twice
        n = ds.query("SELECT count(*) AS n FROM client_io").to_pylist()[0]["n"]
    snap = take_snapshot(root)
    assert snap.files["client_io"] == [] and snap.files[MERGED]
    report = compact(root, RetentionSection(settle_s=0, grace_s=0, full_days=100_000), now=NOW)
    assert report.deleted >= len(raw) and not any((root / f).exists() for f in raw)
    with DatasetStore(root, read_only=True) as ds:
        assert ds.query("SELECT count(*) AS n FROM client_io").to_pylist()[0]["n"] == n


def test_second_pass_row_groups_hold_a_bounded_number_of_records(
    site, dataset, tmp_path, monkeypatch
):
    """Row groups of merged rows are cut by the records they stand for, so a job's query
    skips the other jobs' row groups; the data read back is unchanged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iolens.store import compaction

    monkeypatch.setattr(compaction, "MEMBERS_PER_ROW_GROUP", 10)
    groups = compaction.member_groups(pa.record_batch({"members": [5, 5, 1, 9, 2, 2]}))
    assert groups == [(0, 2), (2, 4), (4, 6)]  # 10, 10, 4 records
    assert compaction.member_groups(pa.record_batch({"members": pa.array([], pa.int64())})) == []

    monkeypatch.setattr(compaction, "MEMBERS_PER_ROW_GROUP", 64)
    root = copy_dataset(dataset, tmp_path / "ds")
    compact(root, KEEP, now=NOW)
    snap = take_snapshot(root)
    files = [root / f for f in snap.files[MERGED]]
    for path in files:
        meta = pq.ParquetFile(path).metadata
        members = pq.read_table(path, columns=["members"]).column("members").to_numpy()
        sizes = np.array([meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
        assert meta.num_row_groups > 1 and sizes.sum() == len(members)
        starts = np.cumsum([0, *sizes[:-1]])
        for a, n in zip(starts, sizes, strict=True):  # each group reaches 64 with its last row
            assert members[a : a + n - 1].sum() < 64
    with DuckDBStore(site.reference, create=False) as ref, DatasetStore(root, read_only=True) as ds:
        assert ds.query(CLIENT).equals(ref.query(CLIENT))
