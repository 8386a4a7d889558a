"""The MPI-IO layer: every wrapped form, hints, ranks, and no double counting downstream.

Runs a real MPI program (workloads/mpiio_calls.c) under `mpirun -np 2`; skips without
an MPI compiler and launcher (Debian: openmpi-bin libopenmpi-dev).
"""

from __future__ import annotations

import datetime as dt
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.analyze import report
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import CLIENT_IO, JOBS
from iolens.store import DuckDBStore, queries
from iolens.tracefile import TraceFile, batch_of, decode_dir
from tests.tracer.conftest import HERE, paths_of
from tests.tracer.mpi import mpi_env, mpicc, needs_mpi

B = 4096


@pytest.fixture(scope="module")
def mpi_run(tracer_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    tmp = tmp_path_factory.mktemp("mpiio")
    exe = mpicc(HERE / "workloads" / "mpiio_calls.c", tmp / "mpiio_calls")
    out, spool = tmp / "out", tmp / "spool"
    out.mkdir()
    env = mpi_env(tracer_lib, spool, IOLENS_JOB_ID="mpi-job")
    res = subprocess.run(
        ["mpirun", "-np", "2", str(exe), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return out, list(decode_dir(spool))


def ranks(traces: list[TraceFile]) -> dict[int, TraceFile]:
    return {t.rank: t for t in traces if t.rank is not None and t.exe.endswith("mpiio_calls")}


def mpiio_rows(t: TraceFile) -> list[dict]:
    paths = paths_of(t)
    return [
        {**r, "path": paths[r["file_id"]]} for r in t.client_io.to_pylist() if r["layer"] == "mpiio"
    ]


@needs_mpi
def test_every_form_is_recorded_with_sizes_and_offsets(mpi_run):
    out, traces = mpi_run
    by_rank = ranks(traces)
    assert sorted(by_rank) == [0, 1]  # ranks from the MPI environment
    shared = str(out / "shared.dat")
    for rank, t in by_rank.items():
        rows = [r for r in mpiio_rows(t) if r["path"] == shared]
        ops = Counter()
        nbytes = Counter()
        for r in rows:
            ops[r["op"]] += r["count"]
            nbytes[r["op"]] += r["size"] * r["count"]
        # 8 blocks + 100 bytes through the shared pointer written, 6 blocks read
        assert ops == Counter(open=1, seek=1, write=9, fsync=1, read=6, close=1)
        assert nbytes["write"] == 8 * B + 100 and nbytes["read"] == 6 * B
        base = rank * 65536  # the view's displacement: offsets are absolute bytes
        seek = next(r for r in rows if r["op"] == "seek")
        assert seek["offset"] == base
        writes = sorted(
            (r["offset"], r["size"], r["stride"], r["count"]) for r in rows if r["op"] == "write"
        )
        assert writes == [
            (-1, 100, 0, 1),  # shared file pointer: offset not queried
            (base, B, B, 5),  # write_at, write_at_all, write, write_all, iwrite_at
            (base + 4 * B, B, 2 * B, 2),  # iwrite (pointer still at 4 B), write_at_all_begin
            (base + 7 * B, B, B, 1),  # write_all_begin/end
        ]
        reads = [(r["offset"], r["count"]) for r in rows if r["op"] == "read"]
        assert reads == [(base, 6)]
        # the second file: opened and closed by both ranks, deleted by rank 0
        scratch = Counter(r["op"] for r in mpiio_rows(t) if r["path"].endswith("scratch.dat"))
        assert scratch == Counter(open=1, close=1, **({"unlink": 1} if rank == 0 else {}))


@needs_mpi
def test_hints_passed_at_open_are_kept(mpi_run):
    out, traces = mpi_run
    for t in ranks(traces).values():
        assert t.hints == {
            str(out / "shared.dat"): {"cb_buffer_size": "1048576", "striping_factor": "4"}
        }


@needs_mpi
def test_posix_records_below_mpiio_share_the_file(mpi_run):
    """Darshan's correlation: the MPI library's POSIX calls are recorded on the same file
    (same path, same file_id), inside the MPI-IO calls' time span."""
    out, traces = mpi_run
    shared = str(out / "shared.dat")
    posix_bytes = 0
    for t in traces:
        paths = paths_of(t)
        rows = [r for r in t.client_io.to_pylist() if paths[r["file_id"]] == shared]
        posix = [r for r in rows if r["layer"] == "posix" and r["op"] == "write"]
        mpi = [r for r in rows if r["layer"] == "mpiio" and r["op"] == "write"]
        posix_bytes += sum(r["size"] * r["count"] for r in posix)
        if mpi and posix:
            assert min(r["t_start"] for r in mpi) <= min(r["t_start"] for r in posix)
            assert max(r["t_end"] for r in posix) <= max(r["t_end"] for r in mpi)
    # Open MPI issues its nonblocking and split-collective writes with POSIX AIO, counted
    # when it collects them with aio_return: the POSIX layer sees every byte (issue 23).
    assert posix_bytes == 2 * (8 * B + 100)


@needs_mpi
def test_report_counts_bytes_once(mpi_run, tmp_path):
    out, traces = mpi_run
    shared = str(out / "shared.dat")
    with DuckDBStore(tmp_path / "db.duckdb") as store:
        for t in traces:
            load(store, batch_of(t))
        rep = report.build(store, "mpi-job")
        posix = store.query(
            "SELECT sum(size * count)::BIGINT AS b FROM client_io JOIN files USING (file_id) "
            "WHERE layer = 'posix' AND op = 'write' AND path = ?",
            [shared],
        ).to_pylist()[0]["b"]
    mpiio = 2 * (8 * B + 100)
    assert rep.io_layers["mpiio"]["write_bytes"] == mpiio
    assert rep.io_layers["mpiio"]["read_bytes"] == 2 * 6 * B
    top = next(f for f in rep.top_files if f["path"] == shared)
    assert top["write_bytes"] == max(posix, mpiio)  # one layer, never both
    assert top["bytes"] == mpiio + 2 * 6 * B  # the application's view
    assert rep.write_bytes - top["write_bytes"] < 10_000  # the rest: stdout, config files
    assert rep.write_bw_span > 0 and rep.write_span_s > 0


def _records(rows: list[tuple[str, str, int, int, int, float, float]]) -> pa.Table:
    """(layer, op, file, pid, bytes, t0, t1) -> CLIENT_IO rows of job `j`."""
    t = dt.datetime(2026, 1, 1)
    return pa.Table.from_pylist(
        [
            {
                "job_id": "j", "node": "n1", "rank": pid, "pid": pid, "layer": layer, "op": op,
                "file_id": f, "offset": -1 if op not in ("read", "write") else 0,
                "size": b, "stride": b, "count": 1,
                "t_start": t + dt.timedelta(seconds=t0), "t_end": t + dt.timedelta(seconds=t1),
                "dur_ns": int((t1 - t0) * 1e9),
            }
            for layer, op, f, pid, b, t0, t1 in rows
        ],
        schema=CLIENT_IO,
    )  # fmt: skip


def test_layers_are_counted_once_without_mpi(tmp_path):
    """The counting rule on hand-made records (runs without MPI)."""
    rows = [
        # file 1: collective write, MPI-IO on both ranks, POSIX by one aggregator
        ("mpiio", "open", 1, 1, 0, 0.0, 0.1), ("mpiio", "open", 1, 2, 0, 0.0, 0.1),
        ("posix", "open", 1, 1, 0, 0.0, 0.05), ("posix", "open", 1, 2, 0, 0.0, 0.05),
        ("mpiio", "write", 1, 1, 1000, 1.0, 3.0), ("mpiio", "write", 1, 2, 1000, 1.0, 2.5),
        ("posix", "write", 1, 1, 2000, 1.5, 2.9),
        # file 2: reads with data sieving: POSIX read more than MPI-IO asked for
        ("mpiio", "read", 2, 1, 100, 4.0, 5.0), ("posix", "read", 2, 1, 400, 4.2, 4.8),
        # file 3: written through POSIX AIO: MPI-IO saw more than POSIX
        ("mpiio", "write", 3, 1, 800, 6.0, 6.5), ("posix", "write", 3, 1, 300, 6.1, 6.2),
        # file 4: plain POSIX
        ("posix", "write", 4, 1, 50, 7.0, 7.1),
    ]  # fmt: skip
    jobs = pa.Table.from_pylist(
        [{"job_id": "j", "user": "u", "nodes": ["n1"], "nprocs": 2, "source": "test"}],
        schema=JOBS,
    )
    with DuckDBStore(tmp_path / "db.duckdb") as store:
        load(store, Batch(source="test", jobs=jobs, client_io=_records(rows)))
        rep = report.build(store, "j")
        flat = queries.client_io(store, "j")
    assert rep.write_bytes == 2000 + 800 + 50  # file 1 POSIX, file 3 MPI-IO, file 4
    assert rep.read_bytes == 400  # the bytes that really moved
    assert rep.md_ops == 2  # the POSIX opens only
    assert rep.io_layers["mpiio"] == {
        "read_bytes": 100, "write_bytes": 2800, "read_ops": 1, "write_ops": 3, "md_ops": 2
    }  # fmt: skip
    # who shares file 1: both ranks at the MPI-IO layer (at POSIX only the aggregator
    # wrote it, and the job would look 1-1)
    assert rep.io_mode == "N-M"
    # span bandwidth at the outermost layer: MPI-IO writes from 1.0 to 6.5 s
    assert rep.write_span_s == pytest.approx(5.5)
    # over the MPI-IO calls' span, their bytes (2 x 1000 + 800): what an MPI program times
    assert rep.write_bw_span == pytest.approx(2800 / 5.5)
    assert rep.read_span_s == pytest.approx(1.0)
    # the cross-layer view reads the same counted records
    assert (
        sum(
            s * c
            for s, c, o in zip(
                *(flat.column(k).to_pylist() for k in ("size", "count", "op")), strict=True
            )
            if o == "write"
        )
        == 2850
    )
