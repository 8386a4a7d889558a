"""The query path over a dataset: same tables, same analyses, results published."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
import pytest

from iolens.analyze.pipeline import analyze_all
from iolens.errors import StoreError
from iolens.model.batch import Batch
from iolens.model.finding import Finding, findings_table
from iolens.model.schema import TABLES
from iolens.store import DuckDBStore, open_store
from iolens.store.dataset import DatasetStore, replay
from iolens.store.dataset_layout import INGEST_TABLES
from iolens.store.segments import SegmentWriter
from tests.scaleout.conftest import copy_dataset
from tests.scaleout.test_segments import samples

EXCLUDE = {"ingested": "loaded_at"}


def rows(store, table: str, exclude: set[str] = frozenset()) -> list[str]:
    """Rows as sorted JSON strings (order-free comparison)."""
    out = store.query(f"SELECT * FROM {table}").to_pylist()
    return sorted(
        json.dumps({k: v for k, v in r.items() if k not in exclude}, default=str, sort_keys=True)
        for r in out
    )


@pytest.mark.parametrize("table", INGEST_TABLES)
def test_every_ingest_table_reads_as_in_the_duckdb_file(site, dataset, table):
    drop = {EXCLUDE[table]} if table in EXCLUDE else set()
    with (
        DuckDBStore(site.reference, create=False) as ref,
        DatasetStore(dataset, read_only=True) as ds,
    ):
        assert rows(ds, table, drop) == rows(ref, table, drop)
        schema = ds.query(f"SELECT * FROM {table} LIMIT 0").schema
        assert schema.names == TABLES[table].names


def test_analyses_run_unchanged_and_agree_with_the_duckdb_file(site, dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    ref_path = tmp_path / "ref.duckdb"
    ref_path.write_bytes(site.reference.read_bytes())
    with DuckDBStore(ref_path, create=False) as ref, DatasetStore(root) as ds:
        analyze_all(ref)
        analyze_all(ds)
        for table, drop in (
            ("anomalies", {"created", "evidence"}),
            ("interference", {"created", "evidence", "delay_s", "score"}),
            ("job_summaries", {"analyzed", "read_bw_avg", "write_bw_avg", "iops_avg"}),
            ("findings", {"created", "evidence", "recommendation"}),
            ("job_phases", {"bw"}),
        ):
            assert rows(ds, table, drop) == rows(ref, table, drop), table
        found = ds.query("SELECT count(*) AS n FROM findings").to_pylist()[0]["n"]
    assert found > 0
    # Published: a later reader (another process, another host) sees the results.
    with DatasetStore(root, read_only=True) as again:
        assert again.query("SELECT count(*) AS n FROM findings").to_pylist()[0]["n"] == found


def test_results_have_one_writer_and_readers_follow_it(dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    writer = DatasetStore(root)
    reader = DatasetStore(root, refresh_s=0)
    assert writer.publishing and not reader.publishing
    f = Finding("IOL999", "test", "info", "job", "j1", {}, "nothing")
    writer.append("findings", findings_table([f]))
    assert reader.query("SELECT code FROM findings").to_pylist() == [{"code": "IOL999"}]
    with writer.transaction():
        writer.execute("DELETE FROM findings WHERE code = ?", ["IOL999"])
        writer.append("findings", findings_table([f, f]))
    assert reader.query("SELECT count(*) AS n FROM findings").to_pylist()[0]["n"] == 2
    writer.close()
    reader.close()


def test_ingest_tables_are_read_only_here(dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    with DatasetStore(root) as ds:
        with pytest.raises(StoreError, match="ingest servers"):
            ds.append("server_samples", samples(1))
        with pytest.raises(StoreError, match="read-only"):
            ds.execute("DELETE FROM jobs")


def test_new_segments_show_up_on_refresh(dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    with DatasetStore(root, read_only=True, refresh_s=3600) as ds:
        before = ds.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
        with SegmentWriter(root, "gc", fsync=False) as w:
            w.load_many([Batch("a", key="new", server_samples=samples(4))])
        same = ds.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
        ds.refresh()
        after = ds.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
    assert (same, after) == (before, before + 4)


def test_a_journal_replays_to_the_same_results(dataset, tmp_path):
    root = copy_dataset(dataset, tmp_path / "ds")
    worker = DatasetStore(root, journal=True)
    assert not worker.publishing
    f = Finding("IOL998", "test", "info", "job", "j2", {}, "x", start=datetime(2025, 1, 1))
    worker.append("findings", findings_table([f]))
    with pytest.raises(RuntimeError), worker.transaction():
        worker.append("findings", findings_table([f]))
        raise RuntimeError("rolled back: not replayed")
    worker.register("_ids", pa.table({"code": ["IOL998"]}))
    with worker.transaction():
        worker.execute("DELETE FROM findings WHERE code IN (SELECT code FROM _ids)")
        worker.append("findings", findings_table([f, f]))
    worker.unregister("_ids")
    journal = worker.journal
    worker.close()
    with DatasetStore(root) as owner:
        replay(journal or [], owner)
        assert owner.query("SELECT count(*) AS n FROM findings").to_pylist()[0]["n"] == 2


def test_open_store_takes_a_dataset_directory_as_db(dataset):
    store = open_store(str(dataset), create=False, read_only=True)
    try:
        assert isinstance(store, DatasetStore)
    finally:
        store.close()
