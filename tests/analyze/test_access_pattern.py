"""Access-pattern surveyor (SIOX FileSurveyor): classes of hand-made streams, a small
store, the simulated jobs, and `iolens job` showing it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from iolens.analyze.jobs.access_pattern import access_patterns, by_file, classify, survey
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


def test_job_json_lists_the_busiest_files_and_counts_all(sim_db):
    """The JSON keeps the 200 busiest streams and files; the counts cover every one."""
    from iolens.present import views

    data = "op IN ('read', 'write') AND \"offset\" >= 0"
    with sim_db.store() as store:
        job_id, n_files = (
            store.query(
                "SELECT job_id, count(DISTINCT (file_id, op)) AS n FROM client_io "
                f"WHERE {data} GROUP BY job_id ORDER BY n DESC, job_id LIMIT 1"
            )
            .to_pylist()[0]
            .values()
        )
        rep = views.job(store, job_id)
        everything = by_file(access_patterns(store, job_id))
    assert n_files > views.ACCESS_PATTERN_ROWS  # the cap is exercised
    assert rep["access_pattern_counts"]["files"] == n_files == len(everything)
    assert rep["access_pattern_counts"]["streams"] >= n_files
    assert rep["access_pattern_files"] == everything[: views.ACCESS_PATTERN_ROWS]
    assert len(rep["access_patterns"]) == views.ACCESS_PATTERN_ROWS


def _reference(store, job_id):
    """The surveyor's answer built the plain way, a dict per stream and Python sorting (the
    code `survey` replaced), then `by_file` on those rows."""
    from iolens.analyze.jobs.access_pattern import TOP_STRIDES, _pattern, _records

    t = _records(store, job_id)
    if t.num_rows == 0:
        return [], []
    cols = {k: t.column(k).to_numpy(zero_copy_only=False) for k in t.column_names}
    stream = cols["stream"].astype(np.int64)
    c = classify(stream, cols["off"], cols["size"], cols["stride"], cols["count"])
    count = cols["count"].astype(np.int64)
    files = store.query("SELECT file_id, path FROM files").to_pydict()
    known = dict(zip(files["file_id"], files["path"], strict=True))
    rows = {}
    for i, sid in enumerate(stream.tolist()):
        path = known.get(int(cols["file_id"][i]))
        r = rows.setdefault(
            sid,
            {
                "path": path if path is not None else f"<file {int(cols['file_id'][i])}>",
                "file_id": int(cols["file_id"][i]),
                "node": str(cols["node"][i]),
                "rank": int(cols["rank"][i]),
                "pid": int(cols["pid"][i]),
                "layer": str(cols["layer"][i]),
                "op": str(cols["op"][i]),
                "accesses": 0,
                "bytes": 0,
                "sequential": 0,
                "strided": 0,
                "random": 0,
                "_tally": {},
            },
        )
        r["accesses"] += int(count[i])
        r["bytes"] += int(count[i] * cols["size"][i])
        r["sequential"] += int(c["seq"][i])
        r["strided"] += int(c["strided"][i])
        r["random"] += int(c["random"][i])
        for s_key, n_key in (
            ("internal_stride", "n_internal_strided"),
            ("between_stride", "n_between_strided"),
            ("first_stride", "n_first_strided"),
        ):
            if (w := int(c[n_key][i])) > 0:
                r["_tally"][int(c[s_key][i])] = r["_tally"].get(int(c[s_key][i]), 0) + w
    out = []
    for r in rows.values():
        top = sorted(r.pop("_tally").items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_STRIDES]
        r["strides"] = [{"stride": s, "count": k} for s, k in top]
        r["pattern"] = _pattern(r)
        out.append(r)
    out.sort(key=lambda r: (-r["accesses"], r["path"], r["rank"], r["pid"], r["op"]))
    return out, by_file(out)


def test_survey_equals_the_rows_summed_per_file(sim_db, tmp_path):
    """The array path (`survey`) gives the very rows, in the same order, that summing every
    stream row per file gives; a limit keeps the head of both lists."""
    with _store(tmp_path) as store:
        rows, files = _reference(store, "j1")
        got = survey(store, "j1")
        assert (got.streams, got.files, got.n_streams, got.n_files) == (rows, files, 4, 2)
    with sim_db.store() as store:
        checked = 0
        for job_id in sim_db.truth["jobs"]:
            rows, files = _reference(store, job_id)
            got = survey(store, job_id, limit=50)
            assert got.streams == rows[:50], job_id
            assert got.files == files[:50], job_id
            assert (got.n_streams, got.n_files) == (len(rows), len(files))
            checked += bool(rows)
        assert checked >= 10
