"""`iolens import lmt`: real LMT databases (NERSC, via pytokio) as server-side samples, and
the zoom-in weather factors read from them (issue 21).

Figures are checked against SQL run on the database itself, not against the importer's
own arithmetic: bytes per interval are differences of LMT's cumulative counters, CPU is
LMT's %CPU gauge.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from iolens.analyze.darshan.zoomin import weather_before
from iolens.ingest.importers.lmt import lmt_batch
from iolens.ingest.load import load
from iolens.store import DuckDBStore
from tests.conftest import SHARED_DATA
from tests.golden import check_golden

LMT = SHARED_DATA / "pytokio-lmt-and-lustre-cli"
RESET = LMT / "lmtdb-reset.sqlite3"  # Cori snx11168, with a gap and a counter reset
EDISON = LMT / "snx11025_2018-01-28.sqlite3"  # Edison snx11025, 24 OSTs x 61 times
GOLDEN = Path(__file__).resolve().parents[1] / "cases" / "import" / "lmt"
PACIFIC = ZoneInfo("America/Los_Angeles")  # NERSC's servers' time


def _need(p: Path) -> Path:
    if not p.is_file():
        pytest.skip(f"{p} is not available")
    return p


def _rows(table: Any) -> list[dict[str, Any]]:
    """A `Columns` table as dicts, times in ISO form, nulls left out."""
    cols = table.columns
    out = []
    for row in zip(*cols.values(), strict=True):
        pairs = zip(cols, row, strict=True)
        out.append({k: v.isoformat() if isinstance(v, datetime) else v for k, v in pairs
                    if v is not None})  # fmt: skip
    return out


def test_golden_rows_of_a_database_with_a_gap_and_a_reset() -> None:
    batch = lmt_batch(_need(RESET), PACIFIC)
    metrics = _rows(batch.metrics)
    series: dict[str, list[dict[str, Any]]] = {}
    for m in metrics:
        series.setdefault(f"{m['kind']} {m['component_id']} {m['metric']}", []).append(m)
    got = {
        "key": batch.key,
        "components": _rows(batch.components),
        "server_samples": _rows(batch.server_samples),
        "metrics": {k: {"rows": len(v), "first": v[0], "last": v[-1]} for k, v in series.items()},
    }
    check_golden(GOLDEN / "lmtdb-reset.json", got)


def test_the_reset_after_the_gap_counts_from_zero() -> None:
    """07:35:45 -> 07:39:05 (200 s without data): LMT's counters restarted at 0, so that
    interval moved 0 bytes, and the next non-zero value counts whole."""
    samples = _rows(lmt_batch(_need(RESET), PACIFIC).server_samples)
    ost = [s for s in samples if s["kind"] == "ost"]
    gap = next(s for s in ost if s["interval_s"] > 5)
    assert gap["ts"] == "2018-04-18T14:39:05" and gap["interval_s"] == 200.0  # PDT + 7 h
    assert gap["read_bytes"] == gap["write_bytes"] == 0
    after = next(s for s in ost if s["ts"] == "2018-04-18T14:40:20")
    assert (after["read_bytes"], after["write_bytes"]) == (62537728, 774221064)
    assert all(s["read_bytes"] >= 0 and s["write_bytes"] >= 0 for s in ost)


def test_bytes_per_ost_are_the_counters_differences() -> None:
    db = _need(EDISON)
    batch = lmt_batch(db, PACIFIC)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    expected = dict(
        con.execute(
            "SELECT i.OST_NAME, max(d.WRITE_BYTES) - min(d.WRITE_BYTES) FROM OST_DATA d "
            "JOIN OST_INFO i USING (OST_ID) GROUP BY 1"
        ).fetchall()
    )
    got: dict[str, int] = {}
    for s in _rows(batch.server_samples):
        if s["kind"] == "ost":
            assert s["interval_s"] == 5.0
            got[s["component_id"]] = got.get(s["component_id"], 0) + s["write_bytes"]
    assert got == expected and len(got) == 24
    ts = sorted({s["ts"] for s in _rows(batch.server_samples)})
    assert (ts[0], ts[-1]) == ("2018-01-28T08:00:05", "2018-01-28T08:05:00")  # PST + 8 h


def _lmt_at(db: Path, local: str, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    return con.execute(sql, [local]).fetchall()


def test_weather_before_a_job_comes_from_lmt(tmp_path: Path) -> None:
    """A job starting at 00:02:00 Pacific on Edison: the 5 s before it are LMT's sample of
    00:02:00 exactly, so the factors are that sample's figures."""
    db = _need(EDISON)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert load(store, lmt_batch(db, PACIFIC))
        assert load(store, lmt_batch(db, PACIFIC)) == {}  # a database loaded before: nothing
        start = datetime(2018, 1, 28, 8, 2, 0)
        w = weather_before(store, start)
        on_two = weather_before(store, start, [0, 1])  # Darshan's OST indices
    moved = _lmt_at(
        db,
        "2018-01-28 00:02:00",
        "SELECT i.OST_NAME, i.HOSTNAME, (d.READ_BYTES + d.WRITE_BYTES) - (p.READ_BYTES + "
        "p.WRITE_BYTES) FROM OST_DATA d JOIN TIMESTAMP_INFO t ON t.TS_ID = d.TS_ID "
        "JOIN TIMESTAMP_INFO tp ON tp.TIMESTAMP = datetime(t.TIMESTAMP, '-5 seconds') "
        "JOIN OST_DATA p ON p.OST_ID = d.OST_ID AND p.TS_ID = tp.TS_ID "
        "JOIN OST_INFO i ON i.OST_ID = d.OST_ID WHERE t.TIMESTAMP = ?",
    )
    cpu = dict(
        _lmt_at(
            db,
            "2018-01-28 00:02:00",
            "SELECT s.HOSTNAME, d.PCT_CPU FROM OSS_DATA d JOIN OSS_INFO s USING (OSS_ID) "
            "JOIN TIMESTAMP_INFO t USING (TS_ID) WHERE t.TIMESTAMP = ?",
        )
    )
    ((mds_cpu,),) = _lmt_at(
        db,
        "2018-01-28 00:02:00",
        "SELECT d.PCT_CPU FROM MDS_DATA d JOIN TIMESTAMP_INFO t USING (TS_ID) "
        "WHERE t.TIMESTAMP = ?",
    )
    assert len(moved) == 24
    assert w is not None and w["osts"] == 24
    assert w["ost_io_mb"] == pytest.approx(sum(b for *_, b in moved) / 24 / 1e6)
    assert w["oss_cpu_pct"] == pytest.approx(sum(cpu.values()) / len(cpu))
    assert w["mds_cpu_pct"] == pytest.approx(mds_cpu)
    two = [(name, host, b) for name, host, b in moved if name.endswith(("OST0000", "OST0001"))]
    assert on_two is not None and on_two["osts"] == 2
    assert on_two["ost_io_mb"] == pytest.approx(sum(b for *_, b in two) / 2 / 1e6)
    assert on_two["oss_cpu_pct"] == pytest.approx(sum(cpu[h] for _, h, _ in two) / 2)


def test_weather_is_the_overlap_weighted_mean_between_samples(tmp_path: Path) -> None:
    """Starting at 00:02:02, the window (00:01:57, 00:02:02] takes 3/5 of the 00:02:00
    sample and 2/5 of the 00:02:05 one."""
    db = _need(EDISON)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, lmt_batch(db, PACIFIC))
        w = weather_before(store, datetime(2018, 1, 28, 8, 2, 2))
    sql = (
        "SELECT d.PCT_CPU FROM MDS_DATA d JOIN TIMESTAMP_INFO t USING (TS_ID) WHERE t.TIMESTAMP = ?"
    )
    ((a,),) = _lmt_at(db, "2018-01-28 00:02:00", sql)
    ((b,),) = _lmt_at(db, "2018-01-28 00:02:05", sql)
    assert w is not None and w["mds_cpu_pct"] == pytest.approx(0.6 * a + 0.4 * b)
