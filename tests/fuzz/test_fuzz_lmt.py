"""LMT SQLite databases, fuzzed two ways: hostile values written into a copy of a real
database (text where LMT has numbers, bad UTF-8, huge integers, odd timestamps), and raw
byte damage to the file. The `@example`s are the failures of issue 19."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from iolens.parse.lmt import ost_rates, read_lmt
from tests.fuzz.harness import fuzz, only_input_errors, scratch
from tests.fuzz.seeds import SHARED_DATA

REAL = SHARED_DATA / "pytokio-lmt-and-lustre-cli" / "lmtdb-reset.sqlite3"
pytestmark = pytest.mark.skipif(not REAL.is_file(), reason=f"shared data not available: {REAL}")
_DIR = scratch("lmt")

#: (table, column) pairs read_lmt reads.
COLUMNS = [
    ("TIMESTAMP_INFO", "TIMESTAMP"),
    ("OST_DATA", "READ_BYTES"),
    ("OST_DATA", "WRITE_BYTES"),
    ("OST_DATA", "PCT_CPU"),
    ("OST_DATA", "KBYTES_FREE"),
    ("OST_INFO", "OST_NAME"),
    ("OSS_INFO", "HOSTNAME"),
    ("OSS_DATA", "PCT_MEMORY"),
    ("MDS_DATA", "INODES_USED"),
    ("MDS_INFO", "MDS_NAME"),
    ("MDS_OPS_DATA", "SAMPLES"),
    ("MDS_OPS_DATA", "SUM"),
    ("OPERATION_INFO", "OPERATION_NAME"),
    ("FILESYSTEM_INFO", "FILESYSTEM_NAME"),
]
VALUES = st.one_of(
    st.sampled_from(["abc", "", "1e400", "nan", "\u00b2", "2018-13-45 99:00:00", "9" * 5000]),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=12),
    st.none(),
    st.text(max_size=20),
)
SQL_TEXT_BAD_UTF8 = "CAST(X'80ff' AS TEXT)"


def _copy() -> Path:
    """A fresh copy per input: a reader that failed mid-query may still hold the last one."""
    for old in _DIR.glob("*.sqlite3*"):
        old.unlink()
    fd, name = tempfile.mkstemp(suffix=".sqlite3", dir=_DIR)
    os.close(fd)
    shutil.copyfile(REAL, name)
    return Path(name)


@given(st.lists(st.tuples(st.sampled_from(COLUMNS), VALUES, st.booleans()), max_size=3))
@example([(("OST_DATA", "READ_BYTES"), "abc", True)])  # issue 19: int('abc') ValueError
@example([(("OST_INFO", "OST_NAME"), SQL_TEXT_BAD_UTF8, True)])  # issue 19: UnicodeDecodeError
@example([(("TIMESTAMP_INFO", "TIMESTAMP"), 10**18, False)])
@example([(("MDS_OPS_DATA", "SAMPLES"), float("-inf"), True)])  # OverflowError: int(-inf)
@example([(("MDS_OPS_DATA", "SAMPLES"), "abc", False)])  # ValueError, one row
@fuzz(60)
def test_hostile_values(changes: list) -> None:
    path = _copy()
    con = sqlite3.connect(path)
    with contextlib.closing(con), con:
        for (table, column), value, every_row in changes:
            where = "" if every_row else f" WHERE rowid = (SELECT min(rowid) FROM {table})"
            if value == SQL_TEXT_BAD_UTF8:
                con.execute(f"UPDATE {table} SET {column} = {SQL_TEXT_BAD_UTF8}{where}")
            else:
                con.execute(f"UPDATE {table} SET {column} = ?{where}", (value,))
    data = only_input_errors(lambda: read_lmt(path), str(path))
    if data is not None:
        ost_rates(data.ost)


@given(
    st.lists(
        st.tuples(
            st.integers(0, REAL.stat().st_size - 1 if REAL.is_file() else 0),
            st.binary(min_size=1, max_size=16),
        ),
        max_size=8,
    ),
    st.one_of(st.none(), st.integers(0, REAL.stat().st_size if REAL.is_file() else 0)),
)
@example([(2311, b"\x80")], None)  # issue 19: UnicodeDecodeError (a byte of the schema's SQL)
@example([(3057, b"\0" * 9 + b"\x80\x82")], None)  # long run: SQLite's two-line error
@fuzz(60)
def test_damaged_file(patches: list, cut: int | None) -> None:
    path = _copy()
    raw = bytearray(path.read_bytes())
    for at, junk in patches:
        raw[at : at + len(junk)] = junk
    path.write_bytes(bytes(raw[:cut] if cut is not None else raw))
    data = only_input_errors(lambda: read_lmt(path), str(path))
    if data is not None:
        ost_rates(data.ost)
