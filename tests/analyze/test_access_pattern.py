"""Access-pattern surveyor (SIOX FileSurveyor): classes of hand-made streams, a small
store, the simulated jobs, and `iolens job` showing it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from iolens.analyze.jobs.access_pattern import access_patterns, by_file, classify
from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, FILES, JOBS
from iolens.store import DuckDBStore
from tests.conftest import run_cli


def classes(*records: tuple[int, int, int, int, int]) -> dict[str, int]:
    """(stream, offset, size, stride, count) records -> totals per class."""
    a = np.array(records, np.int64)
    c = classify(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4])
    return {k: int(c[k].sum()) for k in ("seq", "strided", "random")}


def test_contiguous_runs_are_sequential_across_records():
    assert classes((0, 0, 100, 100, 10), (0, 1000, 100, 100, 5)) == {
        "seq": 15,
        "strided": 0,
        "random": 0,
    }


def test_strided_runs_keep_their_stride_across_records():
    assert classes((0, 0, 100, 1000, 10), (0, 10_000, 100, 1000, 5)) == {
        "seq": 0,
        "strided": 15,
        "random": 0,
    }
    # backwards, and one record split in single calls
    assert classes((0, 900, 10, -100, 4), (0, 500, 10, 10, 1), (0, 400, 10, 10, 1))["strided"] == 6
    assert classes((0, 0, 10, 10, 1), (0, 100, 10, 10, 1), (0, 200, 10, 10, 1))["strided"] == 3


def test_random_pairs_are_random():
    # the tracer merges any two accesses into one record with an arbitrary "stride"
    got = classes((0, 5, 8, 777, 2), (0, 91, 8, -50, 2), (0, 3000, 8, 123, 2))
    assert got == {"seq": 0, "strided": 0, "random": 6}


def test_streams_are_independent():
    got = classes((0, 0, 100, 100, 3), (1, 0, 100, 500, 3), (2, 7, 1, 1, 1))
    assert got == {"seq": 3 + 1, "strided": 3, "random": 0}


def _store(tmp_path: Path) -> DuckDBStore:
    store = DuckDBStore(tmp_path / "ap.duckdb")
    t0 = datetime(2025, 1, 6, 8, 0)
    store.append(
        "jobs",
        pa.Table.from_pylist(
            [{"job_id": "j1", "user": "u", "app": "a", "nodes": ["n1"], "nprocs": 2}], schema=JOBS
        ),
    )
    paths = ["/data/strided.bin", "/data/seq.bin"]
    store.append(
        "files",
        pa.Table.from_pylist([{"file_id": file_id(p), "path": p} for p in paths], schema=FILES),
    )

    def rec(rank: int, path: str, op: str, off: int, size: int, stride: int, count: int, k: int):
        return {
            "job_id": "j1",
            "node": "n1",
            "rank": rank,
            "pid": 100 + rank,
            "layer": "posix",
            "op": op,
            "file_id": file_id(path),
            "offset": off,
            "size": size,
            "stride": stride,
            "count": count,
            "t_start": t0 + timedelta(seconds=k),
            "t_end": t0 + timedelta(seconds=k + 1),
            "dur_ns": 1000 * count,
        }

    # rank r reads 1 KiB every 20 KiB (in two flush windows), then writes its own range
    flat = [
        rec(r, paths[0], "read", r * 1024 + k * 50 * 20480, 1024, 20480, 50, k)
        for k in (0, 1)
        for r in (0, 1)
    ]
    flat += [rec(r, paths[1], "write", r * 10**6, 4096, 4096, 100, 5) for r in (0, 1)]
    flat += [rec(0, paths[1], "open", -1, 0, 0, 1, 0)]  # metadata: not an access
    store.append("client_io", pa.Table.from_pylist(flat, schema=CLIENT_IO))
    return store


def test_rows_per_file_process_and_op(tmp_path):
    with _store(tmp_path) as store:
        rows = access_patterns(store, "j1")
    assert len(rows) == 4
    for r in rows:
        assert r["sequential"] + r["strided"] + r["random"] == r["accesses"]
    reads = [r for r in rows if r["op"] == "read"]
    assert {(r["rank"], r["pid"]) for r in reads} == {(0, 100), (1, 101)}
    for r in reads:
        assert (r["path"], r["accesses"], r["bytes"]) == ("/data/strided.bin", 100, 100 * 1024)
        assert r["pattern"] == "strided" and r["strided"] == 100
        assert r["strides"] == [{"stride": 20480, "count": 100}]
    writes = [r for r in rows if r["op"] == "write"]
    assert all(r["pattern"] == "sequential" and r["sequential"] == 100 for r in writes)
    files = by_file(rows)
    assert [(f["path"], f["op"], f["processes"], f["accesses"]) for f in files] == [
        ("/data/seq.bin", "write", 2, 200),
        ("/data/strided.bin", "read", 2, 200),
    ]
    assert files[1]["strides"] == [{"stride": 20480, "count": 200}]


def test_unknown_job_has_no_rows(tmp_path):
    with _store(tmp_path) as store:
        assert access_patterns(store, "nope") == []


def test_simulated_jobs(sim_db):
    """N-N jobs read/write their own files sequentially; N-1 strided jobs show stride =
    processes x request size; every access is counted once."""
    truth = sim_db.truth["jobs"]
    with sim_db.store() as store:
        for job_id, j in truth.items():
            rows = access_patterns(store, job_id)
            if not rows:
                continue
            data = "op IN ('read', 'write') AND \"offset\" >= 0"
            q = f"SELECT sum(count) AS n FROM client_io WHERE job_id = ? AND {data}"
            total = store.query(q, [job_id]).column("n")[0].as_py()
            assert sum(r["accesses"] for r in rows) == total
            for r in rows:
                assert r["sequential"] + r["strided"] + r["random"] == r["accesses"]
            if j["io_mode"] == "N-N":
                assert all(r["pattern"] == "sequential" for r in rows), job_id
            for r in rows:
                if r["pattern"] == "strided":
                    size = r["bytes"] // r["accesses"]
                    assert r["strides"][0]["stride"] % size == 0


def test_job_command_shows_access_patterns(sim_db):
    job_id = next(j for j, v in sim_db.truth["jobs"].items() if v["io_mode"] == "N-1")
    res = run_cli("job", job_id, "--db", str(sim_db.path), "--json")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["access_patterns"] and rep["access_pattern_files"]
    assert {"path", "rank", "pid", "sequential", "strided", "random", "strides", "pattern"} <= set(
        rep["access_patterns"][0]
    )
    assert any(f["pattern"] == "strided" for f in rep["access_pattern_files"])
    res = run_cli("job", job_id, "--db", str(sim_db.path))
    assert res.returncode == 0, res.stderr
    assert "Access patterns" in res.stdout and "strided" in res.stdout
