"""The store file under attack and faults (issue 19): its modes, a damaged file, a disk
that fills and empties again."""

from __future__ import annotations

import os
import stat

import pytest

from iolens.errors import StoreError
from iolens.ingest.load import load
from iolens.store import DuckDBStore
from iolens.store.duckdb_store import DamagedStore
from tests.conftest import run_cli
from tests.ship.helpers import samples_batch

BLOCK = 262_144  # DuckDB's block size


def _mode(p: os.PathLike[str]) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_store_file_wal_and_new_directory_are_private(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "s.duckdb"
        with DuckDBStore(path) as store:
            load(store, samples_batch(1))
            wal = path.with_name(path.name + ".wal")
            assert wal.exists()  # written, not checkpointed yet
            assert _mode(wal) == 0o600
            assert _mode(path) == 0o600
            assert _mode(path.parent) == 0o700
    finally:
        os.umask(old)


def _store_with_data(path) -> None:
    with DuckDBStore(path) as store:
        for i in range(50):
            load(store, samples_batch(i, rows=2000))


def _read_everything(path) -> None:
    with DuckDBStore(path, create=False) as store:
        store.query("SELECT count(*), sum(read_bytes), min(component_id) FROM server_samples")


@pytest.fixture(scope="module")
def good_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "s.duckdb"
    _store_with_data(path)
    _read_everything(path)
    return path.read_bytes()


def test_a_truncated_store_is_named_as_damaged(tmp_path, good_store):
    bad = tmp_path / "cut.duckdb"
    bad.write_bytes(good_store[: len(good_store) // 2])
    with pytest.raises(DamagedStore, match=r"cut\.duckdb is damaged .*restore it from a backup"):
        _read_everything(bad)


# block 3 holds what opening reads (the catalog), block 4 rows read only by a query
@pytest.mark.parametrize("block", [3, 4])
def test_a_store_with_a_zeroed_block_is_named_as_damaged(tmp_path, good_store, block):
    bad = tmp_path / "zeroed.duckdb"
    data = bytearray(good_store)
    start = 3 * 4096 + block * BLOCK  # past the file and database headers
    assert start + BLOCK <= len(data)
    data[start : start + BLOCK] = bytes(BLOCK)
    bad.write_bytes(bytes(data))
    with pytest.raises(DamagedStore, match=r"zeroed\.duckdb is damaged"):
        _read_everything(bad)


def test_the_cli_says_damaged_in_one_line_and_exits_2(tmp_path, good_store):
    bad = tmp_path / "cut.duckdb"
    bad.write_bytes(good_store[: len(good_store) // 2])
    res = run_cli("jobs", "--db", str(bad))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "is damaged" in lines[0]
    assert str(bad) in res.stderr.replace("\n", "")


def test_a_damaged_store_is_still_a_store_error(tmp_path, good_store):
    bad = tmp_path / "cut.duckdb"
    bad.write_bytes(good_store[:5000])
    with pytest.raises(StoreError):
        DuckDBStore(bad, create=False)


def test_a_statement_the_store_refuses_is_not_the_store_failing(tmp_path):
    from iolens.store.faults import is_io_failure, is_store_failure

    with DuckDBStore(tmp_path / "s.duckdb") as store, pytest.raises(StoreError) as refused:
        store.execute("INSERT INTO forwarding VALUES (NULL, 'f1')")  # NOT NULL
    assert not is_store_failure(refused.value)
    full = OSError(28, "No space left on device")
    assert is_store_failure(full) and is_io_failure(full)
    by_design = StoreError("this server only queries the dataset")
    assert is_store_failure(by_design) and not is_io_failure(by_design)


def test_a_damaged_store_is_the_store_failing_not_the_batch(tmp_path, good_store):
    from iolens.store.faults import is_io_failure, is_store_failure

    bad = tmp_path / "zeroed.duckdb"
    data = bytearray(good_store)
    start = 3 * 4096 + 4 * BLOCK  # rows read only by a query
    data[start : start + BLOCK] = bytes(BLOCK)
    bad.write_bytes(bytes(data))
    with DuckDBStore(bad, create=False) as store, pytest.raises(DamagedStore) as damaged:
        store.query("SELECT sum(read_bytes) FROM server_samples")
    assert is_store_failure(damaged.value) and is_io_failure(damaged.value)
