"""A traced job's calls, attributed to the chunkservers its files live on (servers without
jobstats): checked against what a real traced process wrote and read."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.analyze.jobs.crosslayer import layer_series
from iolens.ingest.load import load
from iolens.ingest.traced_targets import BIN_S, target_rows
from iolens.model.batch import Batch
from iolens.model.schema import METRICS
from iolens.store import open_store
from iolens.store.base import Store
from iolens.tracefile import batch_of, decode
from tests.traced import traced_python

# 6 writes of 64 KiB to a.dat, 3 of 128 KiB to b.dat, then b.dat read back whole.
WORKLOAD = """
import os, sys
d = sys.argv[1]
fa = os.open(os.path.join(d, "a.dat"), os.O_CREAT | os.O_WRONLY, 0o600)
for _ in range(6):
    os.write(fa, b"a" * 65536)
os.close(fa)
fb = os.open(os.path.join(d, "b.dat"), os.O_CREAT | os.O_RDWR, 0o600)
for _ in range(3):
    os.write(fb, b"b" * 131072)
os.lseek(fb, 0, 0)
while os.read(fb, 131072):
    pass
os.close(fb)
"""
CS1, CS2 = "192.0.2.2:19423", "192.0.2.2:19425"


@pytest.fixture
def traced(tmp_path: Path) -> tuple[Batch, Path]:
    spool, data = tmp_path / "spool", tmp_path / "data"
    spool.mkdir()
    data.mkdir()
    traced_python(spool, WORKLOAD, str(data), job="77")
    (path,) = spool.glob("*.iolens")
    layouts = {str(data / "a.dat"): [CS1], str(data / "b.dat"): [CS1, CS2]}
    return batch_of(decode(path), layouts=layouts), tmp_path


def _declared(store: Store, when: datetime, *targets: str) -> None:
    """The `moosefs` source's word, every round, that a chunkserver has no jobstats."""
    rows = [{"ts": when, "interval_s": 10.0, "kind": "ost", "component_id": t,
             "metric": "jobstats", "value": 0.0} for t in targets]  # fmt: skip
    load(store, Batch(source="moosefs", metrics=pa.Table.from_pylist(rows, METRICS)))


def _first(batch: Batch) -> datetime:
    return batch.client_io.column("t_start")[0].as_py()  # type: ignore[union-attr]


def _trace_rows(store: Store) -> list[dict]:
    return store.query(
        "SELECT component_id, sum(write_bytes) AS wb, sum(read_bytes) AS rb, "
        "sum(write_ops) AS wo, sum(read_ops) AS ro, min(service_us) AS svc, "
        "count(DISTINCT ts) AS bins, bool_and(epoch(ts) % 60 = 0) AS on_minutes, "
        "any_value(job_id) AS job, any_value(kind) AS kind "
        "FROM server_samples WHERE source = 'trace' GROUP BY component_id ORDER BY 1"
    ).to_pylist()


def test_the_trace_lands_on_its_files_chunkservers(traced: tuple[Batch, Path]) -> None:
    batch, tmp = traced
    with open_store(str(tmp / "s.duckdb"), create=True) as store:
        _declared(store, _first(batch), CS1, CS2)
        load(store, batch)
        rows = _trace_rows(store)
        page = layer_series(store, "77")
    by = {r["component_id"]: r for r in rows}
    # the job page's server layer: every byte the process wrote, on its two chunkservers
    assert page["from_trace"] == [CS1, CS2]
    assert sum(page["layers"]["ost"]["write_bytes"]) == 6 * 65536 + 3 * 131072
    assert set(by) == {CS1, CS2}
    # a.dat: all of it on CS1; b.dat: half of its writes and reads on each chunkserver
    b_written = 3 * 131072
    assert by[CS1]["wb"] == 6 * 65536 + b_written // 2
    assert by[CS2]["wb"] == b_written // 2
    assert by[CS1]["rb"] == by[CS2]["rb"] == b_written // 2
    assert by[CS1]["wo"] == 6 + 2 and by[CS2]["wo"] == 2  # 1.5 rounds to 2 on each side
    for r in rows:
        assert r["job"] == "77" and r["kind"] == "ost" and r["on_minutes"]
        assert r["svc"] > 0


def test_only_targets_without_jobstats_get_rows(traced: tuple[Batch, Path]) -> None:
    """A Lustre OST counts every job itself (jobstats), whether its rows arrive before or
    after the trace: only the chunkserver that said it keeps none gets the trace's rows,
    and b.dat's half on it stays a half."""
    batch, tmp = traced
    with open_store(str(tmp / "s.duckdb"), create=True) as store:
        _declared(store, _first(batch), CS1)
        load(store, batch)
        rows = _trace_rows(store)
    assert [r["component_id"] for r in rows] == [CS1]
    assert rows[0]["wb"] == 6 * 65536 + 3 * 131072 // 2


def test_a_record_over_two_minutes_is_split_by_its_overlap(tmp_path: Path) -> None:
    """The tracer merges like calls into one record; its share of each minute is its share
    of the record's time (here 15 s of 60 s before the minute, 45 s after)."""
    start = datetime(2026, 1, 1, 0, 0, 45)
    io = pa.table(
        {
            "job_id": ["9"],
            "op": ["write"],
            "file_id": pa.array([5], pa.int64()),
            "count": pa.array([400], pa.int64()),
            "size": pa.array([1 << 20], pa.int64()),
            "dur_ns": pa.array([60_000_000_000], pa.int64()),
            "t_start": pa.array([start], pa.timestamp("us")),
            "t_end": pa.array([datetime(2026, 1, 1, 0, 1, 45)], pa.timestamp("us")),
        }
    )
    files = pa.table(
        {"file_id": pa.array([5], pa.int64()), "osts": pa.array([[CS1]], pa.list_(pa.string()))}
    )
    with open_store(str(tmp_path / "s.duckdb"), create=True) as store:
        _declared(store, start, CS1)
        rows = target_rows(store, io, files)
    assert rows is not None
    got = {r["ts"]: (r["write_ops"], r["write_bytes"], r["service_us"]) for r in rows.to_pylist()}
    assert got == {
        datetime(2026, 1, 1, 0, 1): (100, 100 << 20, pytest.approx(150_000.0)),
        datetime(2026, 1, 1, 0, 2): (300, 300 << 20, pytest.approx(150_000.0)),
    }
    assert set(rows.column("interval_s").to_pylist()) == {float(BIN_S)}


def test_the_scale_out_writer_attributes_the_trace_alike(traced: tuple[Batch, Path]) -> None:
    """The dataset's ingest server cannot query its data: it learns which targets keep no
    jobstats from the `moosefs` batches it writes, and gives the trace the same rows the
    embedded store does (loaded in one group commit, the declaration first or not)."""
    from iolens.ingest.load import load_segments
    from iolens.store.dataset import DatasetStore
    from iolens.store.segments import SegmentWriter

    batch, tmp = traced
    rows = [{"ts": _first(batch), "interval_s": 10.0, "kind": "ost", "component_id": CS1,
             "metric": "jobstats", "value": 0.0}]  # fmt: skip
    declared = Batch(source="moosefs", key="m1", metrics=pa.Table.from_pylist(rows, METRICS))
    root = tmp / "ds"
    with SegmentWriter(root, "g1", fsync=False) as w:
        load_segments(w, [batch, declared])
    with DatasetStore(root, read_only=True) as ds:
        got = _trace_rows(ds)
    with open_store(str(tmp / "s.duckdb"), create=True) as store:
        load(store, declared)
        load(store, batch)
        want = _trace_rows(store)
    assert [r["component_id"] for r in got] == [CS1]
    assert got == want
