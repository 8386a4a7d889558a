"""LMT (Lustre Monitoring Tool) databases, read with stdlib sqlite3 (FORMATS.md 2).

pytokio ships SQLite copies of LMT's MySQL schema 1.1: `OST_DATA` holds cumulative
READ_BYTES/WRITE_BYTES per OST per `TIMESTAMP_INFO` row (5 s cadence), `MDS_OPS_DATA` cumulative
per-op SAMPLES/SUM/SUMSQUARES, and `OSS_DATA`/`MDS_DATA` gauges. :func:`read_lmt` returns typed
rows; :func:`ost_rates` turns consecutive OST rows into bandwidth, reading a decrease as a
counter reset (LMT restart or OSS reboot, as in `lmtdb-reset.sqlite3`), never a negative rate.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from iolens.errors import InputError
from iolens.parse.rates import counter_delta

__all__ = [
    "LmtData",
    "LmtMdsOps",
    "LmtMdsSample",
    "LmtOssSample",
    "LmtOstRate",
    "LmtOstSample",
    "ost_rates",
    "read_lmt",
]


@dataclass(frozen=True, slots=True)
class LmtOstSample:
    """One OST at one time: cumulative byte counters plus space/inode gauges."""

    time: datetime
    ost: str
    oss: str | None
    read_bytes: int
    write_bytes: int
    pct_cpu: float | None
    kbytes_free: int | None
    kbytes_used: int | None
    inodes_free: int | None
    inodes_used: int | None


@dataclass(frozen=True, slots=True)
class LmtOssSample:
    """One OSS host at one time."""

    time: datetime
    oss: str
    pct_cpu: float | None
    pct_memory: float | None


@dataclass(frozen=True, slots=True)
class LmtMdsSample:
    """One MDT at one time (gauges)."""

    time: datetime
    mds: str
    pct_cpu: float | None
    kbytes_free: int | None
    kbytes_used: int | None
    inodes_free: int | None
    inodes_used: int | None


@dataclass(frozen=True, slots=True)
class LmtMdsOps:
    """One metadata op counter of one MDT at one time (cumulative)."""

    time: datetime
    mds: str
    op: str
    units: str | None
    samples: int
    sum: int | None
    sumsq: int | None


@dataclass(frozen=True, slots=True)
class LmtData:
    """Everything read from one LMT database, rows ordered by time then component."""

    filesystem: str | None
    ost: tuple[LmtOstSample, ...]
    oss: tuple[LmtOssSample, ...]
    mds: tuple[LmtMdsSample, ...]
    mds_ops: tuple[LmtMdsOps, ...]
    #: (MDT name, host serving it) from MDS_INFO: the OSTs' hosts are on their samples
    mdt_hosts: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class LmtOstRate:
    """Bandwidth of one OST over (start, end]; `reset` when a counter went backwards."""

    start: datetime
    end: datetime
    ost: str
    read_bytes_per_s: float
    write_bytes_per_s: float
    reset: bool


def read_lmt(path: str | Path) -> LmtData:
    """Read an LMT SQLite file (opened read-only). Whatever is wrong with it (not SQLite, a
    missing table or column, text that is not UTF-8, a value that is not a number or a
    time) raises InputError naming the file, and the table and row when known."""
    src = str(path)
    if not Path(path).is_file():
        raise InputError(src, "no such LMT database")
    try:
        uri = Path(path).resolve().as_uri() + "?mode=ro"
        con = sqlite3.connect(uri, uri=True)
    except (sqlite3.Error, OSError, ValueError) as exc:
        raise InputError(src, f"cannot open as SQLite: {exc}") from exc
    try:
        return _read(con, src)
    except sqlite3.Error as exc:
        raise InputError(src, f"not an LMT database: {' '.join(str(exc).split())}") from exc
    except (ValueError, TypeError, UnicodeError) as exc:  # what no check above foresaw
        raise InputError(src, f"unreadable LMT database: {type(exc).__name__}: {exc}") from exc
    finally:
        con.close()


class _Rows:
    """Typed values of one table's rows; a bad one is an InputError naming table and row."""

    def __init__(self, src: str, table: str) -> None:
        self.src, self.table = src, table

    def _bad(self, row: int, column: str, value: object, what: str) -> InputError:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return InputError(self.src, f"{self.table} row {row}: {column} is {shown}, not {what}")

    def int(self, row: int, column: str, value: object) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._bad(row, column, value, "a number")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise self._bad(row, column, value, "an integer")
        return int(value)

    def float(self, row: int, column: str, value: object) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._bad(row, column, value, "a number")
        return float(value)

    def text(self, row: int, column: str, value: object) -> str:
        if not isinstance(value, str):
            raise self._bad(row, column, value, "a name")
        return value

    def time(self, row: int, value: object) -> datetime:
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value)
            except ValueError:
                pass
        raise self._bad(row, "TIMESTAMP", value, "a time")


def _read(con: sqlite3.Connection, src: str) -> LmtData:
    q = con.execute
    fs = q("SELECT FILESYSTEM_NAME FROM FILESYSTEM_INFO LIMIT 1").fetchone()
    if fs is not None and fs[0] is not None and not isinstance(fs[0], str):
        raise _Rows(src, "FILESYSTEM_INFO")._bad(1, "FILESYSTEM_NAME", fs[0], "a name")
    r = _Rows(src, "OST_DATA")
    ost = tuple(
        LmtOstSample(
            r.time(n, t),
            r.text(n, "OST_NAME", name),
            host if host is None else r.text(n, "HOSTNAME", host),
            r.int(n, "READ_BYTES", rb) or 0,
            r.int(n, "WRITE_BYTES", wb) or 0,
            r.float(n, "PCT_CPU", cpu),
            r.int(n, "KBYTES_FREE", kf),
            r.int(n, "KBYTES_USED", ku),
            r.int(n, "INODES_FREE", inf),
            r.int(n, "INODES_USED", inu),
        )
        for n, t, name, host, rb, wb, cpu, kf, ku, inf, inu in q(
            "SELECT d.rowid, t.TIMESTAMP, i.OST_NAME, s.HOSTNAME, d.READ_BYTES, d.WRITE_BYTES,"
            " d.PCT_CPU, d.KBYTES_FREE, d.KBYTES_USED, d.INODES_FREE, d.INODES_USED"
            " FROM OST_DATA d JOIN TIMESTAMP_INFO t ON d.TS_ID = t.TS_ID"
            " JOIN OST_INFO i ON d.OST_ID = i.OST_ID LEFT JOIN OSS_INFO s ON i.OSS_ID = s.OSS_ID"
            " ORDER BY t.TIMESTAMP, i.OST_NAME"
        )
    )
    r = _Rows(src, "OSS_DATA")
    oss = tuple(
        LmtOssSample(
            r.time(n, t),
            r.text(n, "HOSTNAME", host),
            r.float(n, "PCT_CPU", cpu),
            r.float(n, "PCT_MEMORY", mem),
        )
        for n, t, host, cpu, mem in q(
            "SELECT d.rowid, t.TIMESTAMP, s.HOSTNAME, d.PCT_CPU, d.PCT_MEMORY FROM OSS_DATA d"
            " JOIN TIMESTAMP_INFO t ON d.TS_ID = t.TS_ID JOIN OSS_INFO s ON d.OSS_ID = s.OSS_ID"
            " ORDER BY t.TIMESTAMP, s.HOSTNAME"
        )
    )
    r = _Rows(src, "MDS_DATA")
    mds = tuple(
        LmtMdsSample(
            r.time(n, t),
            r.text(n, "MDS_NAME", name),
            r.float(n, "PCT_CPU", cpu),
            r.int(n, "KBYTES_FREE", kf),
            r.int(n, "KBYTES_USED", ku),
            r.int(n, "INODES_FREE", inf),
            r.int(n, "INODES_USED", inu),
        )
        for n, t, name, cpu, kf, ku, inf, inu in q(
            "SELECT d.rowid, t.TIMESTAMP, m.MDS_NAME, d.PCT_CPU, d.KBYTES_FREE, d.KBYTES_USED,"
            " d.INODES_FREE, d.INODES_USED FROM MDS_DATA d"
            " JOIN TIMESTAMP_INFO t ON d.TS_ID = t.TS_ID JOIN MDS_INFO m ON d.MDS_ID = m.MDS_ID"
            " ORDER BY t.TIMESTAMP, m.MDS_NAME"
        )
    )
    r = _Rows(src, "MDS_OPS_DATA")
    ops = tuple(
        LmtMdsOps(
            r.time(n, t),
            r.text(n, "MDS_NAME", name),
            r.text(n, "OPERATION_NAME", op),
            units if units is None else r.text(n, "UNITS", units),
            r.int(n, "SAMPLES", k) or 0,
            r.int(n, "SUM", sm),
            r.int(n, "SUMSQUARES", ss),
        )
        for n, t, name, op, units, k, sm, ss in q(
            "SELECT d.rowid, t.TIMESTAMP, m.MDS_NAME, o.OPERATION_NAME, o.UNITS, d.SAMPLES,"
            " d.SUM, d.SUMSQUARES FROM MDS_OPS_DATA d JOIN TIMESTAMP_INFO t ON d.TS_ID = t.TS_ID"
            " JOIN MDS_INFO m ON d.MDS_ID = m.MDS_ID"
            " JOIN OPERATION_INFO o ON d.OPERATION_ID = o.OPERATION_ID"
            " ORDER BY t.TIMESTAMP, m.MDS_NAME, o.OPERATION_NAME"
        )
    )
    r = _Rows(src, "MDS_INFO")
    hosts = tuple(
        (r.text(n, "MDS_NAME", name), host if host is None else r.text(n, "HOSTNAME", host))
        for n, name, host in q("SELECT rowid, MDS_NAME, HOSTNAME FROM MDS_INFO ORDER BY MDS_NAME")
    )
    return LmtData(fs[0] if fs else None, ost, oss, mds, ops, hosts)


def ost_rates(samples: Iterable[LmtOstSample]) -> list[LmtOstRate]:
    """Read/write bandwidth per OST between consecutive timestamps; a decrease in either
    counter marks a reset and the new value counts as the bytes since then."""
    last: dict[str, LmtOstSample] = {}
    out: list[LmtOstRate] = []
    for s in sorted(samples, key=lambda s: (s.time, s.ost)):
        prev = last.get(s.ost)
        last[s.ost] = s
        if prev is None:
            continue
        dt = (s.time - prev.time).total_seconds()
        if dt <= 0:
            continue
        rd, r_reset, _ = counter_delta(prev.read_bytes, s.read_bytes)
        wd, w_reset, _ = counter_delta(prev.write_bytes, s.write_bytes)
        out.append(LmtOstRate(prev.time, s.time, s.ost, rd / dt, wd / dt, r_reset or w_reset))
    return out
