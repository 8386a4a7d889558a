"""Hostile LMT databases (issue 19): `read_lmt` raised ValueError, OverflowError or let text
through as numbers; every failure is now an InputError naming the file, table and row.

Each case damages a copy of a real pytokio LMT database (../shared/data) with SQL.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iolens.errors import InputError
from iolens.parse.lmt import read_lmt
from tests.conftest import SHARED_DATA

LMT = SHARED_DATA / "pytokio-lmt-and-lustre-cli" / "lmtdb-reset.sqlite3"
pytestmark = pytest.mark.skipif(not LMT.is_file(), reason="../shared/data not available")


def _damaged(tmp_path: Path, sql: str, params: tuple[object, ...] = ()) -> Path:
    db = tmp_path / "lmt.sqlite3"
    shutil.copy(LMT, db)
    con = sqlite3.connect(db)
    con.execute(sql, params)
    con.commit()
    con.close()
    return db


CASES = {
    "text in a counter": (
        "UPDATE OST_DATA SET READ_BYTES = 'abc' WHERE rowid = (SELECT min(rowid) FROM OST_DATA)",
        r"OST_DATA row \d+: READ_BYTES is 'abc', not a number",
    ),
    "infinite counter": (
        "UPDATE OST_DATA SET WRITE_BYTES = 9e999 WHERE rowid = (SELECT min(rowid) FROM OST_DATA)",
        r"OST_DATA row \d+: WRITE_BYTES is inf, not an integer",
    ),
    "blob counter": (
        "UPDATE MDS_OPS_DATA SET SAMPLES = x'0102'"
        " WHERE rowid = (SELECT min(rowid) FROM MDS_OPS_DATA)",
        r"MDS_OPS_DATA row \d+: SAMPLES is b'\\x01\\x02', not a number",
    ),
    "text in a gauge": (
        "UPDATE OST_DATA SET PCT_CPU = 'lots' WHERE rowid = (SELECT min(rowid) FROM OST_DATA)",
        r"OST_DATA row \d+: PCT_CPU is 'lots', not a number",
    ),
    "name that is not UTF-8": (
        "UPDATE OST_INFO SET OST_NAME = CAST(x'fffe41' AS TEXT)",
        "not an LMT database: Could not decode to UTF-8 column 'OST_NAME'",
    ),
    "numeric timestamp": (
        "UPDATE TIMESTAMP_INFO SET TIMESTAMP = 12345",
        "not a time",
    ),
    "missing table": ("DROP TABLE MDS_OPS_DATA", "not an LMT database: no such table"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_database_is_one_input_error(tmp_path: Path, case: str) -> None:
    sql, words = CASES[case]
    db = _damaged(tmp_path, sql)
    with pytest.raises(InputError) as info:
        read_lmt(db)
    assert info.value.source == str(db)
    assert re.search(words, str(info.value)), str(info.value)


def test_not_sqlite_at_all(tmp_path: Path) -> None:
    for name, data in (("garbage", b"garbage"), ("truncated", LMT.read_bytes()[:5000])):
        db = tmp_path / name
        db.write_bytes(data)
        with pytest.raises(InputError, match=rf"^{db}: not an LMT database"):
            read_lmt(db)


_VALUES = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.text(max_size=12),
    st.binary(max_size=12),
)
_COLUMNS = [
    ("OST_DATA", "READ_BYTES"), ("OST_DATA", "KBYTES_FREE"), ("OST_DATA", "PCT_CPU"),
    ("OSS_DATA", "PCT_MEMORY"), ("MDS_DATA", "INODES_USED"), ("MDS_OPS_DATA", "SUM"),
    ("TIMESTAMP_INFO", "TIMESTAMP"), ("OST_INFO", "OST_NAME"), ("OPERATION_INFO", "UNITS"),
]  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=st.sampled_from(_COLUMNS), value=_VALUES)
def test_any_value_anywhere_reads_or_is_an_input_error(
    tmp_path: Path, where: tuple[str, str], value: object
) -> None:
    table, column = where
    db = _damaged(
        tmp_path,
        f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT min(rowid) FROM {table})",
        (value,),
    )
    try:
        data = read_lmt(db)
    except InputError as exc:
        assert exc.source == str(db)
        return
    for s in data.ost:  # what it returns is typed
        assert isinstance(s.read_bytes, int) and isinstance(s.ost, str)
        assert s.pct_cpu is None or isinstance(s.pct_cpu, float)
