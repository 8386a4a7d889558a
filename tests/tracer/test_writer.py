"""The Python trace writer: what it writes, the decoder reads back record for record.

Round trips start from files the real tracer wrote (threads, forks, stdio, metadata
runs merged per directory, layouts from a stand-in Lustre), so the writer is held to the
C tracer's format, not to its own idea of it; the summaries it folds from records are
compared with the ones the tracer folded itself.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.errors import InputError
from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, FILES
from iolens.tracefile import Layout, TraceFile, decode, decode_dir
from iolens.tracefile import format as fmt
from iolens.tracefile.writer import encode, fold, process_trace, write
from tests.tracer.conftest import needs_cc, run
from tests.tracer.test_layouts import traced_run

HEADER_FIELDS = (
    "job_id", "host", "pid", "ppid", "rank", "exe", "user", "uid", "start", "end", "partial",
    "dropped_records", "dropped_calls", "dropped_files", "missed_calls", "spool_errors",
    "calls", "flags", "segment", "hints", "layouts", "layouts_lost",
)  # fmt: skip


def sort_summaries(t: pa.Table) -> pa.Table:
    return t.sort_by([("file_id", "ascending"), ("layer", "ascending")])


def assert_same(a: TraceFile, b: TraceFile) -> None:
    for f in HEADER_FIELDS:
        assert getattr(a, f) == getattr(b, f), f
    assert a.client_io.equals(b.client_io)
    assert a.files.sort_by("file_id").equals(b.files.sort_by("file_id"))
    assert sort_summaries(a.summaries).equals(sort_summaries(b.summaries))


def round_trip(t: TraceFile, tmp: Path) -> TraceFile:
    return decode(write(t, tmp / "again"))


@needs_cc
@pytest.mark.parametrize("mode", ["threads", "fork", "stdio", "meta", "n1"])
def test_real_tracer_files_round_trip(mode: str, tracer_lib, workload, tmp_path: Path):
    r = run(workload, mode, tmp_path, lib=tracer_lib)
    assert r.rc == 0
    traces = r.traces()
    assert traces
    for i, t in enumerate(traces):
        again = round_trip(t, tmp_path / str(i))
        assert_same(t, again)
        assert again.version == fmt.FORMAT_VERSION == 6 and t.records == again.records


@needs_cc
def test_folded_summaries_match_the_tracers(tracer_lib, workload, tmp_path: Path):
    """One thread, every record in one chunk: the tracer folded exactly these records in
    this order, so the writer's fold must give its summaries field for field. Times in
    calls differ by rounding only: the tracer converts summed clock ticks, the decoded
    records each carry their own rounded nanoseconds."""
    times = ("read_time_ns", "write_time_ns", "meta_time_ns")
    for mode in ("stdio", "meta", "small"):
        r = run(workload, mode, tmp_path, lib=tracer_lib, tag=mode)
        for t in r.traces():
            assert t.records < 1024 and not t.partial
            mine, theirs = sort_summaries(fold(t.client_io)), sort_summaries(t.summaries)
            assert mine.drop(times).equals(theirs.drop(times)), mode
            for c in times:
                diff = [
                    abs(a - b)
                    for a, b in zip(mine[c].to_pylist(), theirs[c].to_pylist(), strict=True)
                ]
                assert max(diff) <= t.records, (mode, c)


@needs_cc
def test_layouts_of_a_traced_run_round_trip(tracer_lib, fake_lustre, layouts_prog, tmp_path: Path):
    (t,), _, _ = traced_run(tracer_lib, fake_lustre, layouts_prog, tmp_path)
    assert len(t.layouts) == 2
    again = round_trip(t, tmp_path)
    assert_same(t, again)
    # the writer's own files are a fixed point: encoding what it wrote gives the same bytes
    assert encode(again) == encode(decode(write(again, tmp_path / "third")))


def test_layouts_round_trip(tmp_path: Path):
    t = process_trace(client_rows(), files_rows(), user="carol")
    again = decode(write(t, tmp_path))
    assert again.layouts["/lustre/run/out.dat"] == Layout(
        stripe_size=1 << 20, stripe_count=3, osts=(0, 10, 3), fsname="scratch"
    )
    assert {r["path"]: r["osts"] for r in again.files.to_pylist()}["/lustre/run/out.dat"] == [
        "scratch-OST0000", "scratch-OST000a", "scratch-OST0003",
    ]  # fmt: skip
    assert_same(t, again)
    # a layout the tracer read with flags and a composite magic keeps them
    pfl = Layout(1 << 20, 1, (7, 0, 1), "scratch", magic=0x0BD60BD0, flags=1, components=3)
    t2 = dataclasses.replace(t, layouts={"/lustre/run/out.dat": pfl}, layouts_lost=3)
    again = decode(write(t2, tmp_path / "b"))
    assert again.layouts["/lustre/run/out.dat"] == pfl and again.layouts_lost == 3


def test_simulated_process_through_the_tracer_format(tmp_path: Path):
    """What the simulator does: rows of one process in, a spool file out, decoded as if
    the tracer had run; the summaries are the tracer's fold of the rows."""
    rows = client_rows()
    t = process_trace(rows, files_rows(), exe="/apps/wrf", user="carol", uid=1001)
    path = write(t, tmp_path)
    assert path.name == f"c001-4242-{1_700_000_000 * 10**9}-0.iolens"
    assert not list(tmp_path.glob("*.partial"))
    (back,) = decode_dir(tmp_path)
    assert back.client_io.equals(rows)
    assert (back.exe, back.user, back.uid, back.rank, back.calls) == (
        "/apps/wrf",
        "carol",
        1001,
        3,
        21,
    )
    (s_out, s_dir) = sort_summaries(back.summaries).to_pylist()[:2]
    out_id = file_id("/lustre/run/out.dat")
    s = {r["file_id"]: r for r in back.summaries.to_pylist()}[out_id]
    assert s["write_ops"] == 16 and s["bytes_written"] == 16 << 20 and s["consec_writes"] == 15
    assert s["write_size_hist"][5] == 16 and s["max_byte_written"] == (16 << 20) - 1
    assert s["open_ops"] == 1 and s["close_ops"] == 1
    assert {r["file_id"] for r in (s_out, s_dir)} <= {out_id, file_id("/lustre/run")}


def test_bad_input_is_named(tmp_path: Path):
    rows = client_rows()
    two = pa.concat_tables(
        [rows, rows.set_column(3, "pid", pa.array([1] * rows.num_rows, pa.int32()))]
    )
    with pytest.raises(InputError, match="one process's records"):
        process_trace(two, files_rows(), user="carol")
    with pytest.raises(InputError, match="has no row"):
        process_trace(rows, files_rows().slice(0, 1), user="carol")
    bad = files_rows().set_column(
        3, "osts", pa.array([None, ["not-an-ost"]], pa.list_(pa.string()))
    )
    with pytest.raises(InputError, match="not <fs>-OST<hex>"):
        process_trace(rows, bad, user="carol")


# -- rows as the simulator makes them ----------------------------------------------------------


T0 = dt.datetime(2023, 11, 14, 22, 13, 20)


def files_rows() -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "file_id": file_id("/lustre/run"),
                "path": "/lustre/run",
                "stripe_size": None,
                "osts": None,
            },
            {
                "file_id": file_id("/lustre/run/out.dat"),
                "path": "/lustre/run/out.dat",
                "stripe_size": 1 << 20,
                "osts": ["scratch-OST0000", "scratch-OST000a", "scratch-OST0003"],
            },
        ],
        schema=FILES,
    )


def client_rows() -> pa.Table:
    def row(
        op: str, fid: int, offset: int, size: int, stride: int, count: int, s: float, e: float
    ) -> dict:
        return {
            "job_id": "100001", "node": "c001", "rank": 3, "pid": 4242, "layer": "posix",
            "op": op, "file_id": fid, "offset": offset, "size": size, "stride": stride,
            "count": count, "t_start": T0 + dt.timedelta(seconds=s),
            "t_end": T0 + dt.timedelta(seconds=e), "dur_ns": int((e - s) * 1e9 * 0.9),
        }  # fmt: skip

    out, d = file_id("/lustre/run/out.dat"), file_id("/lustre/run")
    return pa.Table.from_pylist(
        [
            row("open", out, -1, 0, 0, 1, 0.0, 0.000123),
            row("write", out, 0, 1 << 20, 1 << 20, 16, 0.001, 0.5),
            row("close", out, -1, 0, 0, 1, 0.5, 0.500007),
            row("stat", d, -1, 0, 0, 3, 0.6, 0.6000011),
        ],
        schema=CLIENT_IO,
    )
