"""Decoder: a hand-built file decodes to known tables; damaged files raise InputError."""

from __future__ import annotations

import datetime as dt
import struct
from pathlib import Path

import numpy as np
import pytest

from iolens.errors import InputError
from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, FILES
from iolens.tracefile import SUMMARIES, decode, decode_dir
from iolens.tracefile import format as fmt

BASE_WALL = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z


def section(kind: int, payload: bytes, aux: int = 0) -> bytes:
    return struct.pack("<IIQ", kind, aux, len(payload)) + payload


def layout_entry(osts: list[int], fsname: bytes = b"lustre", stripe_size: int = 1 << 20) -> bytes:
    """A version-3 FILES layout part: struct iol_layout_entry, then the OST indices."""
    e = np.zeros(1, fmt.LAYOUT_ENTRY)
    e[0] = (fmt.LOV_MAGIC_V1, 0, stripe_size, len(osts), 1, len(osts), fsname)
    idx = struct.pack(f"<{len(osts)}I", *osts)
    return e.tobytes() + idx + b"\0" * ((-len(idx)) % 8)


def build(
    records: np.ndarray | None = None,
    end: bool = True,
    version: int = 1,
    layout: bytes | None = None,
    lost: int = 0,
) -> bytes:
    """A complete file: 2 ticks per ns clock, two files, one record block; `layout` is
    the layout part of /scratch/a.dat's FILES entry (format version 3)."""
    if records is None:
        records = np.zeros(2, fmt.RECORD)
        records[0] = (fmt.OP_NAMES.index("write"), 0, 0, 2, 0, 4096, 8192, 10, 1000, 3000, 800)
        records[1] = (fmt.OP_NAMES.index("stat"), 0, fmt.R_DIR, 3, -1, 0, 0, 5, 4000, 5000, 500)
    paths = {1: "<other>", 2: "/scratch/a.dat", 3: "/scratch"}
    files = b""
    for idx, p in paths.items():
        raw = p.encode()
        pad = (-len(raw)) % 8
        flags = fmt.FE_LAYOUT if layout is not None and idx == 2 else 0
        files += (
            struct.pack("<IIII", idx, 3 if idx == 2 else 0, len(raw), flags) + raw + b"\0" * pad
        )
        if flags:
            files += layout
    summ = np.zeros(1, fmt.summary_dtype(version))
    summ[0]["file"] = 2
    summ[0]["ops"][1] = 10
    summ[0]["bytes_written"] = 40960
    summ[0]["max_byte_read"] = -1
    summ[0]["max_byte_written"] = 9 * 8192 + 4095
    summ[0]["hist_write"][2] = 10
    summ[0]["t_first"], summ[0]["t_last"], summ[0]["time_write"] = 1000, 3000, 800
    h = np.zeros(1, fmt.header_dtype(version))
    strings = b"job-7" + b"node01" + b"/bin/app" + b"alice"
    h[0]["flags"] = fmt.F_PARTIAL
    h[0]["pid"], h[0]["ppid"], h[0]["rank"], h[0]["uid"] = 4242, 1, 3, 1000
    h[0]["start_wall_ns"], h[0]["end_wall_ns"] = BASE_WALL, BASE_WALL + 10_000_000
    h[0]["base_ticks"], h[0]["base_wall_ns"], h[0]["ns_per_tick"] = 0, BASE_WALL, 0.5
    h[0]["calls"], h[0]["records"] = 15, 2
    h[0]["dropped_records"], h[0]["dropped_calls"] = 1, 7
    h[0]["files"] = 4
    if version >= 3:
        h[0]["layouts"], h[0]["layouts_lost"] = int(layout is not None), lost
    h[0]["len_job_id"], h[0]["len_host"], h[0]["len_exe"], h[0]["len_user"] = 5, 6, 8, 5
    out = fmt.MAGIC + struct.pack("<II", version, fmt.ENDIAN_MARK)
    out += section(fmt.SEC_RECORDS, records.tobytes(), aux=99)
    out += section(fmt.SEC_FILES, files)
    out += section(fmt.SEC_SUMMARY, summ.tobytes())
    out += section(fmt.SEC_HEADER, h.tobytes() + strings)
    if end:
        out += section(fmt.SEC_END, b"")
    return out


@pytest.mark.parametrize("version", [1, 2, 3, 5, 6])
def test_golden(version: int, tmp_path: Path):
    p = tmp_path / "node01-4242-1-0.iolens"
    p.write_bytes(build(version=version))
    t = decode(p)
    assert (t.job_id, t.host, t.pid, t.rank, t.exe, t.user) == (
        "job-7",
        "node01",
        4242,
        3,
        "/bin/app",
        "alice",
    )
    assert t.start == dt.datetime(2023, 11, 14, 22, 13, 20)
    assert t.end - t.start == dt.timedelta(milliseconds=10)
    assert t.partial and t.dropped_records == 1 and t.dropped_calls == 7 and t.calls == 15
    assert t.files.schema == FILES and t.client_io.schema == CLIENT_IO
    assert t.summaries.schema == SUMMARIES
    assert sorted(t.files.column("path").to_pylist()) == ["/scratch", "/scratch/a.dat"]
    rows = t.client_io.to_pylist()
    assert rows[0] == {
        "job_id": "job-7",
        "node": "node01",
        "rank": 3,
        "pid": 4242,
        "layer": "posix",
        "op": "write",
        "file_id": file_id("/scratch/a.dat"),
        "offset": 0,
        "size": 4096,
        "stride": 8192,
        "count": 10,
        "t_start": dt.datetime(2023, 11, 14, 22, 13, 20, 0),  # 1000 ticks = 500 ns
        "t_end": dt.datetime(2023, 11, 14, 22, 13, 20, 1),  # 3000 ticks = 1.5 us
        "dur_ns": 400,
    }
    assert rows[1]["op"] == "stat" and rows[1]["file_id"] == file_id("/scratch")
    assert rows[1]["count"] == 5 and rows[1]["offset"] == -1
    (s,) = t.summaries.to_pylist()
    assert s["write_ops"] == 10 and s["bytes_written"] == 40960 and s["read_ops"] == 0
    assert s["max_byte_read"] is None and s["write_size_hist"][2] == 10
    assert s["write_time_ns"] == 400
    assert [x.pid for x in decode_dir(tmp_path)] == [4242]
    assert t.version == version and t.layouts == {}
    assert t.files.column("stripe_size").null_count == t.files.num_rows


def test_version_3_layouts(tmp_path: Path):
    p = tmp_path / "t.iolens"
    p.write_bytes(build(version=3, layout=layout_entry([4, 10, 4], b"scratch"), lost=2))
    t = decode(p)
    assert t.layouts_lost == 2
    lay = t.layouts["/scratch/a.dat"]
    assert (lay.stripe_size, lay.stripe_count, lay.osts, lay.fsname) == (
        1 << 20,
        3,
        (4, 10, 4),
        "scratch",
    )
    rows = {r["path"]: r for r in t.files.to_pylist()}
    # each OST once, in first-use order, named as Lustre names targets
    assert rows["/scratch/a.dat"]["osts"] == ["scratch-OST0004", "scratch-OST000a"]
    assert rows["/scratch/a.dat"]["stripe_size"] == 1 << 20
    assert rows["/scratch"]["osts"] is None
    # without a fs name the indices stay in the layout; no guessed names in the table
    p.write_bytes(build(version=3, layout=layout_entry([1], b"")))
    t = decode(p)
    assert t.layouts["/scratch/a.dat"].osts == (1,)
    assert {r["path"]: r["osts"] for r in t.files.to_pylist()}["/scratch/a.dat"] is None


def test_version_6_ops(tmp_path: Path):
    """The five ops of format 6 decode from records and from the longer summary."""
    recs = np.zeros(5, fmt.RECORD)
    for k, op in enumerate(("truncate", "fadvise", "access", "link", "readdir")):
        off = 4096 if op == "truncate" else -1
        recs[k] = (fmt.OP_NAMES.index(op), 0, 0, 2, off, 0, 0, k + 1, 10 * k, 10 * k + 5, 5)
    p = tmp_path / "t.iolens"
    p.write_bytes(build(recs, version=6))
    t = decode(p)
    got = {r["op"]: (r["count"], r["offset"]) for r in t.client_io.to_pylist()}
    assert got == {
        "truncate": (1, 4096), "fadvise": (2, -1), "access": (3, -1), "link": (4, -1),
        "readdir": (5, -1),
    }  # fmt: skip
    assert fmt.SUMMARY.itemsize == 440 and fmt.summary_dtype(5).itemsize == 400


def test_old_summary_reads_new_ops_as_zero(tmp_path: Path):
    p = tmp_path / "t.iolens"
    p.write_bytes(build(version=5))
    (s,) = decode(p).summaries.to_pylist()
    assert s["write_ops"] == 10 and s["bytes_written"] == 40960
    assert s["truncate_ops"] == s["readdir_ops"] == 0 and s["write_time_ns"] == 400


def corruptions() -> dict[str, tuple[bytes, str]]:
    good = build()
    bad_rec = np.zeros(1, fmt.RECORD)
    bad_rec[0] = (0, 0, 0, 77, 0, 1, 1, 1, 0, 0, 0)
    bad_op = np.zeros(1, fmt.RECORD)
    bad_op[0] = (200, 0, 0, 2, 0, 1, 1, 1, 0, 0, 0)
    new_op = np.zeros(1, fmt.RECORD)  # a version-6 op code in a version-5 file
    new_op[0] = (fmt.OP_NAMES.index("truncate"), 0, 0, 2, 100, 0, 0, 1, 0, 0, 0)
    long_layout = bytearray(layout_entry([1]))
    long_layout[20:24] = struct.pack("<I", 10**6)  # nosts: more indices than the file has
    return {
        "empty": (b"", "preamble"),
        "magic": (b"NOTATRACE" + good[9:], "bad magic"),
        "version": (build(version=9), "format version 9"),
        "truncated": (good[:-40], "truncated"),
        "no-end": (build(end=False), "no END section"),
        "cut-in-section-header": (good[:20], "partial section header"),
        "unknown-file": (build(bad_rec), "file index 77"),
        "unknown-op": (build(bad_op), "unknown op"),
        "v6-op-in-v5": (build(new_op, version=5), "unknown op"),
        "trailing": (good + b"\0" * 16, "after the END"),
        "layout-in-v2": (build(version=2, layout=layout_entry([1])), "added in version 3"),
        "layout-too-long": (build(version=3, layout=long_layout), "inside a layout's OST list"),
    }


@pytest.mark.parametrize("case", list(corruptions()))
def test_corrupt_files_raise_input_error(case: str, tmp_path: Path):
    data, message = corruptions()[case]
    p = tmp_path / f"{case}.iolens"
    p.write_bytes(data)
    with pytest.raises(InputError) as err:
        decode(p)
    assert err.value.source == str(p)
    assert message in err.value.message


def test_partial_files_are_not_listed(tmp_path: Path):
    (tmp_path / "x.iolens.partial").write_bytes(build(end=False))
    assert list(decode_dir(tmp_path)) == []
