"""`iolens import darshan`: every log of ../shared/data/darshan-logs and of the darshan
package's examples imports (or fails with a clear per-file error), job summaries match the
goldens, and the bytes and ops the per-job report shows match Darshan's own counters.

The shared logs skip cleanly when ../shared/data is absent; the package's examples are
always there. The 2-million-segment DXT log is left to `bench/darshan/` (memory, time).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import darshan
import numpy as np
import pyarrow as pa
import pytest

from iolens.analyze import report
from iolens.ingest import darshan_merge
from iolens.ingest.darshan_merge import merge_segments
from iolens.ingest.darshan_reader import DarshanLog, read_log
from iolens.ingest.darshan_records import DXT_MODULES, SEGMENT, DxtRecord
from iolens.ingest.importers import darshan as imp
from iolens.ingest.importers import darshan_counters, darshan_dxt, sacct
from iolens.ingest.importers.darshan_writer import combine_jobs
from iolens.ingest.load import load
from iolens.model.finding import Finding, findings_table
from iolens.model.ids import file_id
from iolens.store import DuckDBStore
from tests.conftest import SHARED_DATA, run_cli
from tests.golden import check_golden

EXAMPLES = Path(darshan.__file__).parent / "examples"
SHARED = SHARED_DATA / "darshan-logs"
GENERATED = SHARED_DATA / "darshan-logs-generated"
GOLDEN = Path(__file__).resolve().parents[1] / "cases" / "import" / "darshan"
MACSIO_LOG = "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"
#: logs of the shared folder that are broken on purpose, and what their error says
BROKEN = {"empty_log/empty_log.darshan": "empty Darshan log: no module data"}
#: the generated stress logs the tests import (the 2 M-segment one is the benchmark's)
GENERATED_LOGS = ("ior-dxt-1m", "ior-dxt-4k", "mdtest-20k", "micro-posix")
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data not available")

#: counter modules whose bytes reach the file system, their prefix and op counters: the
#: ground truth for the report's read/write bytes and ops. MPI-IO and POSIX see the same
#: file; per file and direction the one that saw more bytes counts (normally POSIX).
_TRUTH = {
    "POSIX": ("POSIX", ["READS"], ["WRITES"]),
    "MPI-IO": (
        "MPIIO",
        ["INDEP_READS", "COLL_READS", "SPLIT_READS", "NB_READS"],
        ["INDEP_WRITES", "COLL_WRITES", "SPLIT_WRITES", "NB_WRITES"],
    ),
    "STDIO": ("STDIO", ["READS"], ["WRITES"]),
    "DFS": ("DFS", ["READS", "READXS"], ["WRITES", "WRITEXS"]),
}


def _logs(root: Path) -> list[Path]:
    return sorted(root.rglob("*.darshan"))


def _store(path: Path) -> DuckDBStore:
    return DuckDBStore(path)


@pytest.fixture(scope="module")
def examples_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list]]:
    db = tmp_path_factory.mktemp("darshan") / "examples.duckdb"
    with _store(db) as store:
        results = imp.import_logs(store, [EXAMPLES])
    yield db, results


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list]]:
    if not SHARED.is_dir():
        pytest.skip("../shared/data not available")
    db = tmp_path_factory.mktemp("darshan") / "shared.duckdb"
    generated = [GENERATED / f"{n}.darshan" for n in GENERATED_LOGS]
    with _store(db) as store:
        results = imp.import_logs(store, [SHARED, *[p for p in generated if p.exists()]])
    yield db, results


# -- ground truth ---------------------------------------------------------------------------


def _blocks(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """The log's header job and its counter blocks (no pandas: the tests read many)."""
    with DarshanLog(path) as log:
        job = log.header_job()
        return job, log.read_static(job, frames=False)["blocks"]


def _counter_truth(paths: list[str]) -> dict[str, int]:
    """Bytes and ops a job's logs moved at the file-system layer, from Darshan's counters."""
    out = {"read_bytes": 0, "write_bytes": 0, "read_ops": 0, "write_ops": 0}
    for p in paths:
        blocks = _blocks(p)[1]
        per_file: dict[str, dict[tuple[int, str], list[int]]] = {}
        for module, (pre, reads, writes) in _TRUTH.items():
            b = blocks.get(module)
            if b is None:
                continue
            for op, what, names in (("read", "READ", reads), ("write", "WRITTEN", writes)):
                nbytes = np.clip(b.col(f"{pre}_BYTES_{what}"), 0, None)
                ops = np.sum([np.clip(b.col(f"{pre}_{k}"), 0, None) for k in names], axis=0)
                for rid, nb, n in zip(b.ids.tolist(), nbytes.tolist(), ops.tolist(), strict=True):
                    acc = per_file.setdefault(module, {}).setdefault((rid, op), [0, 0])
                    acc[0] += int(nb)
                    acc[1] += int(n)
        posix, mpi = per_file.get("POSIX", {}), per_file.get("MPI-IO", {})
        for key in set(posix) | set(mpi):
            nb, n = max(posix.get(key, [0, 0]), mpi.get(key, [0, 0]), key=lambda v: v[0])
            out[f"{key[1]}_bytes"] += nb
            out[f"{key[1]}_ops"] += n
        for module in ("STDIO", "DFS"):
            for (_, op), (nb, n) in per_file.get(module, {}).items():
                out[f"{op}_bytes"] += nb
                out[f"{op}_ops"] += n
    return out


def _jobs(db: Path) -> dict[str, list[str]]:
    with DuckDBStore(db, create=False) as store:
        rows = store.query("SELECT job_id, path FROM darshan_logs ORDER BY path").to_pylist()
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["job_id"], []).append(r["path"])
    return out


def _summaries(db: Path, root: Path, results: list) -> dict[str, Any]:
    """What the goldens pin: per log its header and modules, per job the report's figures."""
    logs: dict[str, Any] = {}
    with DuckDBStore(db, create=False) as store:
        rows = store.query("SELECT * FROM darshan_logs").to_pylist()
        by_path = {r["path"]: r for r in rows}
        for res in results:
            name = str(res.path.relative_to(root))
            if res.status != "imported":
                logs[name] = {"status": res.status, "error": res.error.split(": ", 1)[1]}
                continue
            r = by_path[str(res.path.resolve())]
            logs[name] = {
                "job_id": r["job_id"],
                "nprocs": r["nprocs"],
                "exe": Path(r["exe"].split()[0]).name if r["exe"].split() else "",
                "log_version": r["log_version"],
                "lib_version": r["lib_version"],
                "modules": {
                    m: {k: v for k, v in info.items() if k in ("records", "partial", "segments")}
                    for m, info in sorted(json.loads(r["modules"]).items())
                },
                "bytes": _module_bytes(_blocks(res.path)[1]),
                "client_io_rows": res.client_io,
            }
        ids = sorted({r["job_id"] for r in rows})
        jobs = {
            rep.job_id: {k: getattr(rep, k) for k in _REPORT_KEYS}
            for rep in report.build_many(store, ids)
        }
    return {"logs": logs, "jobs": jobs}


_REPORT_KEYS = ("app", "nprocs", "io_mode", "read_bytes", "write_bytes", "read_ops")
_REPORT_KEYS += ("write_ops", "md_ops", "io_procs", "files")


def _module_bytes(blocks: dict[str, Any]) -> dict[str, list[int]]:
    """Total bytes read and written per counter module, as Darshan counted them."""
    out = {}
    for module, b in sorted(blocks.items()):
        read = [c for c in b.cnames if c.endswith("_BYTES_READ")]
        written = [c for c in b.cnames if c.endswith("_BYTES_WRITTEN")]
        if read or written:
            out[module] = [
                int(np.clip(b.col(read[0]), 0, None).sum()) if read else 0,
                int(np.clip(b.col(written[0]), 0, None).sum()) if written else 0,
            ]
    return out


def _check_truth(db: Path) -> None:
    jobs = _jobs(db)
    with DuckDBStore(db, create=False) as store:
        reports = report.build_many(store, sorted(jobs))
    assert len(reports) == len(jobs)
    for rep in reports:
        got = {k: getattr(rep, k) for k in ("read_bytes", "write_bytes", "read_ops", "write_ops")}
        assert got == _counter_truth(jobs[rep.job_id]), (rep.job_id, jobs[rep.job_id])


# -- the package's examples (always present) ------------------------------------------------


def test_examples_import_and_match_golden(examples_db):
    db, results = examples_db
    assert len(results) == len(_logs(EXAMPLES)) > 0
    assert all(r.status == "imported" for r in results), [r.error for r in results]
    check_golden(GOLDEN / "examples.json", _summaries(db, EXAMPLES, results))


def test_examples_report_bytes_and_ops_equal_the_counters(examples_db):
    _check_truth(examples_db[0])


def test_examples_round_trip_through_the_store(examples_db):
    """The `darshan_*` tables give back the counters the log holds."""
    from iolens.store.darshan import load_log

    with DuckDBStore(examples_db[0], create=False) as store:
        keys = store.query("SELECT log_key, path FROM darshan_logs").to_pylist()
        for k in keys:
            stored, direct = load_log(store, k["log_key"]), read_log(k["path"], dxt=False)
            assert sorted(stored.modules) == sorted(direct.modules)
            for m, data in direct.modules.items():
                a = stored.modules[m].counters.sort_values(["rank", "id"]).to_numpy()
                b = data.counters.sort_values(["rank", "id"]).to_numpy()
                assert (a == b).all(), (k["path"], m)


def test_reimport_is_skipped_and_adds_nothing(examples_db, tmp_path):
    db, _ = examples_db
    copy = tmp_path / "renamed.darshan"
    shutil.copy(EXAMPLES / "example_logs" / "example.darshan", copy)
    with DuckDBStore(db, create=False) as store:
        before = {t: _count(store, t) for t in ("client_io", "darshan_records", "jobs", "files")}
        again = imp.import_logs(store, [EXAMPLES, copy])
        after = {t: _count(store, t) for t in before}
    assert {r.status for r in again} == {"skipped"}
    assert after == before


def _count(store: DuckDBStore, table: str) -> int:
    return store.query(f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py()


def test_broken_files_fail_clearly_and_the_rest_imports(tmp_path):
    good = EXAMPLES / "example_logs" / "dxt.darshan"
    data = good.read_bytes()
    (tmp_path / "truncated.darshan").write_bytes(data[: len(data) // 2])
    (tmp_path / "header-only.darshan").write_bytes(data[:200])
    (tmp_path / "garbage.darshan").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "zero.darshan").write_bytes(b"")
    (tmp_path / "dir.darshan").mkdir()  # a directory named like a log: searched, not read
    shutil.copy(good, tmp_path / "good.darshan")
    with _store(tmp_path / "s.duckdb") as store:
        results = {r.path.name: r for r in imp.import_logs(store, [tmp_path, tmp_path / "nope"])}
        assert _count(store, "darshan_logs") == 1
    assert results["good.darshan"].status == "imported"
    expect = {
        "truncated.darshan": "truncated Darshan log",
        "header-only.darshan": "not a readable Darshan log",
        "garbage.darshan": "not a readable Darshan log",
        "zero.darshan": "empty file (0 bytes)",
        "nope": "no such file",
    }
    for name, words in expect.items():
        res = results[name]
        assert res.status == "failed" and res.error.startswith(str(tmp_path / name)), res
        assert words in res.error, res.error


def test_a_log_that_fails_while_streaming_leaves_nothing(tmp_path, monkeypatch):
    """Client rows already streamed in the log's own transaction are rolled back; the logs
    queued before it are written."""
    monkeypatch.setattr(darshan_dxt, "DXT_CHUNK", 100)  # make dxt.darshan spill after a few records
    good = EXAMPLES / "example_logs" / "dxt.darshan"
    with DarshanLog(good) as log:
        off, length = log._maps[log.modules["DXT_POSIX"]["idx"]]
    data = bytearray(good.read_bytes())
    data[off + length // 2 : off + length - 64] = bytes(length // 2 - 64)  # zeros mid-stream
    (tmp_path / "b-broken.darshan").write_bytes(bytes(data))
    shutil.copy(EXAMPLES / "example_logs" / "example.darshan", tmp_path / "a-good.darshan")
    with _store(tmp_path / "s.duckdb") as store:
        results = {r.path.name: r for r in imp.import_logs(store, [tmp_path])}
        jobs = store.query("SELECT DISTINCT job_id FROM client_io").column(0).to_pylist()
    assert results["a-good.darshan"].status == "imported"
    broken = results["b-broken.darshan"]
    assert broken.status == "failed" and "corrupt Darshan log: DXT_POSIX" in broken.error
    assert jobs == ["4478544"]


def test_dxt_streams_the_same_segments_as_libdarshan_util():
    for path in (EXAMPLES / "example_logs").glob("*.darshan"):
        with DarshanLog(path) as log:
            for module in DXT_MODULES:
                if module in log.modules:
                    assert _segments(log.dxt(module)) == _segments(log._dxt_whole(module))


def _segments(records: Any) -> list:
    out = []
    for rec in records:
        for op, windows in rec.ops():
            for w in windows:
                out.append((rec.id, rec.rank, rec.hostname, op, w.tolist()))
    return out


@pytest.mark.parametrize("window", [1, 3, 4, 1 << 16])
def test_merging_reproduces_every_segment(window):
    rng = np.random.default_rng(7)
    offs = np.r_[
        np.arange(0, 4096 * 50, 4096),  # contiguous
        np.arange(10**6, 10**6 + 30 * 10_000, 10_000),  # strided
        rng.integers(0, 10**9, 40),  # random
        [5, 5, 5, 100, 100],  # repeats and a reset
        np.arange(0, -50, -10),  # backwards
    ]
    sizes = np.r_[np.full(50, 4096), np.full(30, 512), rng.integers(1, 9, 40), [8] * 5, [4] * 5]
    segs = np.zeros(len(offs), dtype=[("offset", "<i8"), ("length", "<i8"), ("start", "<f8"),
                                      ("end", "<f8")])  # fmt: skip
    segs["offset"], segs["length"] = offs, sizes
    segs["start"] = np.arange(len(offs)) * 1.0
    segs["end"] = segs["start"] + 0.5
    runs = merge_segments(segs, window)
    k = np.arange(runs["count"].sum()) - np.repeat(np.cumsum(runs["count"]) - runs["count"],
                                                   runs["count"])  # fmt: skip
    offset = np.repeat(runs["offset"], runs["count"]) + k * np.repeat(runs["stride"], runs["count"])
    assert offset.tolist() == offs.tolist()
    assert np.repeat(runs["size"], runs["count"]).tolist() == sizes.tolist()
    assert runs["busy"].sum() == pytest.approx(0.5 * len(offs))
    if window >= len(offs):
        assert runs["count"][0] == 50 and runs["stride"][0] == 4096  # contiguous -> one run
        assert runs["count"][1] == 30 and runs["stride"][1] == 10_000


def _pieces_frame(parts: Iterator[dict[str, Any]]) -> Any:
    return darshan_merge.dxt_frame(list(parts))


def _random_records(rng: np.random.Generator, n: int) -> list[DxtRecord]:
    """DXT records of 0-40 segments per op (some of a window or more), with runs to find:
    equal sizes and strides, repeats, random jumps."""
    recs = []
    for i in range(n):
        ops = {}
        big = rng.random() < 0.05
        for op in ("write", "read"):
            k = int(rng.integers(0, 40)) + (
                darshan_merge.MERGE_WINDOW if big and op == "write" else 0
            )
            segs = np.zeros(k, SEGMENT)
            size = rng.choice([1, 8, 4096], k)
            size[rng.random(k) < 0.7] = 4096
            segs["length"] = size
            step = np.where(rng.random(k) < 0.8, size, rng.integers(0, 10**6, k))
            segs["offset"] = np.cumsum(step) - step
            segs["start"] = np.sort(rng.uniform(0, 100, k))
            segs["end"] = segs["start"] + rng.uniform(0, 0.1, k)
            ops[op] = segs
        rec = DxtRecord("DXT_POSIX", i, i % 4, f"h{i % 2}", len(ops["write"]), len(ops["read"]))
        windows = {op: [a[j : j + darshan_merge.MERGE_WINDOW]
                        for j in range(0, len(a), darshan_merge.MERGE_WINDOW)]
                   for op, a in ops.items()}  # fmt: skip
        rec._source = iter([(op, iter(w)) for op, w in windows.items()])
        recs.append((rec, windows))
    return recs


def test_small_records_merged_together_give_each_records_own_runs():
    """`merged_records` (many small records per numpy pass) is `merged_dxt` record by
    record: the same runs in the same order, on random records and on every real log."""
    rng = np.random.default_rng(11)
    made = _random_records(rng, 400)
    again = []
    for rec, windows in made:
        twin = DxtRecord(rec.module, rec.id, rec.rank, rec.hostname, rec.writes, rec.reads)
        twin._source = iter([(op, iter(w)) for op, w in windows.items()])
        again.append(twin)
    one_by_one = _pieces_frame(p for rec, _ in made for p in darshan_merge.merged_dxt(rec))
    together = _pieces_frame(darshan_merge.merged_records(again))
    assert len(together) == len(one_by_one) > 400
    assert together.equals(one_by_one)
    logs = [
        *(EXAMPLES / "example_logs").glob("*.darshan"),
        *SHARED_DATA.glob("darshan-logs/**/*.darshan"),
    ]
    checked = 0
    for path in logs:
        try:
            log = DarshanLog(path)
        except Exception:
            continue  # unreadable logs are other tests' business
        with log:
            for module in DXT_MODULES:
                if module in log.modules:
                    a = _pieces_frame(
                        p for r in log.dxt(module) for p in darshan_merge.merged_dxt(r)
                    )
                    b = _pieces_frame(darshan_merge.merged_records(log.dxt(module)))
                    assert (a is None and b is None) or a.equals(b), path
                    checked += 1
    assert checked >= (5 if (SHARED_DATA / "darshan-logs").is_dir() else 3)  # PyDarshan's: 3


def test_contiguous_dxt_merges_into_one_record(examples_db):
    """dxt.darshan's sequential reads come back as a handful of strided records."""
    with DuckDBStore(examples_db[0], create=False) as store:
        row = store.query(
            "SELECT count(*) AS rows, sum(count) AS ops FROM client_io "
            "WHERE job_id = '1537455' AND op IN ('read', 'write')"
        ).to_pylist()[0]
    info = json.loads(
        _one(examples_db[0], "SELECT modules FROM darshan_logs WHERE job_id = '1537455'")
    )
    assert row["ops"] > info["DXT_POSIX"]["segments"] / 2  # DXT, not counters
    assert row["rows"] < info["DXT_POSIX"]["segments"] * 0.7


def _one(db: Path, sql: str) -> Any:
    with DuckDBStore(db, create=False) as store:
        return store.query(sql).column(0)[0].as_py()


def test_lustre_layouts_reach_the_files_table(examples_db):
    job = read_log(EXAMPLES / "example_logs" / "example.darshan", dxt=False)
    assert job.lustre is not None
    rid, osts = int(job.lustre["id"][0]), job.lustre["osts"][0]
    with DuckDBStore(examples_db[0], create=False) as store:
        row = store.query(
            "SELECT path, stripe_size, osts FROM files WHERE file_id = ?",
            [file_id(job.names[rid])],
        ).to_pylist()[0]
    assert row["path"] == job.names[rid]
    assert row["stripe_size"] == int(job.lustre["stripe_size"][0])
    assert row["osts"] == [f"OST{o:04x}" for o in osts]


# -- merging with the scheduler ---------------------------------------------------------------

_SACCT = (
    "JobID|JobName|User|NodeList|State|Start|End\n"
    "4478544|mysim|alice|nid[0001-0002]|COMPLETED|2017-03-20T10:00:00|2017-03-20T11:00:00\n"
    "4478544.0|mysim||nid[0001-0002]|COMPLETED|2017-03-20T10:00:05|2017-03-20T10:59:00\n"
)
_LOG = EXAMPLES / "example_logs" / "example.darshan"  # job 4478544, 2,048 ranks


@pytest.mark.parametrize("sacct_first", [True, False])
def test_scheduler_fields_win_and_darshan_fills_the_rest(tmp_path, sacct_first):
    batch, _ = sacct.batch_of_text(_SACCT, "jobs.txt", tz="UTC")
    with _store(tmp_path / "s.duckdb") as store:
        if sacct_first:
            load(store, batch)
        imp.import_logs(store, [_LOG])
        if not sacct_first:
            load(store, batch)
        jobs = store.query("SELECT * FROM jobs").to_pylist()
        rep = report.build(store, "4478544")
    assert len(jobs) == 1
    j = jobs[0]
    assert (j["user"], j["app"], j["nodes"], j["state"]) == (
        "alice",
        "mysim",
        ["nid0001", "nid0002"],
        "COMPLETED",
    )
    assert j["start"] == datetime(2017, 3, 20, 10, 0) and j["end"] == datetime(2017, 3, 20, 11)
    assert j["nprocs"] == 2048  # sacct had no NTasks: Darshan's rank count fills it
    assert j["source"] == "slurm"
    assert rep.write_bytes == _counter_truth([str(_LOG)])["write_bytes"]


def test_two_logs_of_one_job_widen_it():
    """Several executables of one allocation: one job, earliest start, latest end, every
    host; a scheduler's row keeps its fields and only gains what it lacked."""
    t = datetime(2024, 1, 1, 12)
    a = {"job_id": "42", "user": "u", "app": "a", "nodes": ["n1"], "nprocs": 4, "start": t,
         "end": t.replace(hour=13), "state": None, "source": "darshan"}  # fmt: skip
    b = {**a, "app": "b", "nodes": ["n2"], "nprocs": 8, "start": t.replace(hour=11),
         "end": t.replace(hour=12, minute=30)}  # fmt: skip
    m = combine_jobs(a, b)
    assert (m["app"], m["nodes"], m["nprocs"]) == ("a", ["n1", "n2"], 8)
    assert (m["start"], m["end"]) == (b["start"], a["end"])
    slurm = {**a, "user": "alice", "nodes": None, "nprocs": None, "source": "slurm"}
    m = combine_jobs(slurm, b)
    assert (m["user"], m["nodes"], m["nprocs"], m["start"]) == ("alice", ["n2"], 8, a["start"])
    assert m["source"] == "slurm"


# -- diagnosis hook ---------------------------------------------------------------------------


def _finding(job_id: str, code: str, created: datetime | None = None) -> Finding:
    f = Finding(code, "test-rule", "warning", "job", job_id, {"n": 1}, "do less")
    if created is not None:
        f.created = created
    return f


def test_analyzer_findings_replace_older_ones_of_its_codes(tmp_path):
    with _store(tmp_path / "s.duckdb") as store:
        old = [_finding("4478544", c, datetime(2020, 1, 1)) for c in ("DRS001", "IOL001")]
        store.append("findings", findings_table(old))

        def analyze(job: Any) -> tuple[set[str], pa.Table]:
            assert job.has("POSIX") and job.nprocs == 2048
            return {"DRS001", "DRS002"}, findings_table([_finding(job.job_id, "DRS002")])

        (res,) = imp.import_logs(store, [_LOG], analyze=analyze)
        codes = store.query("SELECT code FROM findings ORDER BY code").column(0).to_pylist()
    assert res.status == "imported" and res.findings == 1
    assert codes == ["DRS002", "IOL001"]  # DRS001 replaced, the job rule's finding kept


def test_a_failing_analyzer_does_not_lose_the_log(tmp_path):
    def analyze(job: Any) -> tuple[set[str], pa.Table]:
        raise RuntimeError("rule bug")

    with _store(tmp_path / "s.duckdb") as store:
        (res,) = imp.import_logs(store, [_LOG], analyze=analyze)
        assert _count(store, "darshan_logs") == 1
    assert res.status == "imported"
    assert res.notes == ["diagnosis failed: RuntimeError: rule bug"]


# -- the command line -------------------------------------------------------------------------


def test_cli_imports_summarizes_and_the_job_report_shows_it(tmp_path):
    db = str(tmp_path / "c.duckdb")
    res = run_cli("import", "darshan", str(EXAMPLES / "example_logs"), "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    n = len(_logs(EXAMPLES / "example_logs"))
    assert (s["logs"], s["imported"], s["skipped"], s["failed"]) == (n, n, 0, 0)
    assert s["logs_per_s"] > 0 and s["records"] > 0 and s["client_io"] > 0
    job = json.loads(run_cli("job", "4478544", "--db", db, "--json").stdout)
    truth = _counter_truth([str(_LOG)])
    assert {k: job[k] for k in truth} == truth
    assert job["io_mode"] == "N-1" and job["io_procs"] == 2048


def test_cli_exits_2_when_every_log_fails(tmp_path):
    bad = tmp_path / "bad.darshan"
    bad.write_bytes(b"not a log at all")
    res = run_cli("import", "darshan", str(bad), "--db", str(tmp_path / "c.duckdb"))
    assert res.returncode == 2
    assert "bad.darshan: not a readable Darshan log" in res.stderr
    assert "Imported 0 of 1 Darshan log(s)" in res.stdout


def test_cli_with_nothing_to_import_is_an_input_error(tmp_path):
    from iolens.errors import InputError
    from iolens.present.cli.darshan_import import import_darshan

    with pytest.raises(InputError, match=r"no \*\.darshan files found"):
        import_darshan([tmp_path], db=tmp_path / "c.duckdb")


# -- the shared logs ----------------------------------------------------------------------------


@needs_shared
def test_every_shared_log_imports_or_fails_clearly(shared_db):
    db, results = shared_db
    failed = {str(r.path.relative_to(SHARED)): r.error for r in results if r.status == "failed"}
    assert set(failed) == set(BROKEN)
    for name, words in BROKEN.items():
        assert words in failed[name]
    versions = _one(db, "SELECT list(DISTINCT lib_version ORDER BY lib_version) FROM darshan_logs")
    assert versions[0].startswith("3.0") and versions[-1].startswith("3.5")
    check_golden(GOLDEN / "shared.json", _summaries(db, SHARED_DATA, results))


@needs_shared
def test_shared_report_bytes_and_ops_equal_the_counters(shared_db):
    _check_truth(shared_db[0])


@needs_shared
def test_partial_flags_are_kept(shared_db):
    db, _ = shared_db
    with DuckDBStore(db, create=False) as store:
        rows = store.query(
            "SELECT l.path, m.module, m.partial, l.modules FROM darshan_logs l "
            "JOIN darshan_modules m USING (log_key) WHERE l.path LIKE '%partial_data_%'"
        ).to_pylist()
    by = {(Path(r["path"]).name, r["module"]): r for r in rows}
    assert by[("partial_data_stdio.darshan", "STDIO")]["partial"] is True
    assert by[("partial_data_stdio.darshan", "POSIX")]["partial"] is False
    dxt = json.loads(by[("partial_data_dxt.darshan", "POSIX")]["modules"])
    assert dxt["DXT_POSIX"]["partial"] and dxt["DXT_MPIIO"]["partial"]
    assert not dxt["POSIX"]["partial"]


@needs_shared
def test_heatmap_bins_become_metrics(shared_db):
    db, _ = shared_db
    log = SHARED / "release_logs" / "mpi-io-test-x86_64-3.5.0.darshan"
    with DarshanLog(log) as d:
        job = d.header_job()
        maps = d.read_static(job, frames=False)["heatmaps"]
    want = sum(int(h.read_bins.sum() + h.write_bins.sum()) for h in maps)
    got = _one(
        db,
        f"SELECT sum(value * interval_s) FROM metrics WHERE job_id = '{job.job_id}' "
        "AND metric LIKE 'darshan_%'",
    )
    assert want > 0 and got == pytest.approx(want)


@needs_shared
def test_dxt_hosts_and_apmpi_nodes_name_the_job_nodes(shared_db):
    db, _ = shared_db
    nodes = _one(db, "SELECT nodes FROM jobs WHERE job_id = '526820'")  # APMPI, 2 nodes
    assert len(nodes) == 2


@pytest.mark.parametrize("comp", [0, 1, 2])
def test_regions_decompress_as_chains_of_streams(tmp_path, monkeypatch, comp):
    """A region is zlib or bzip2 streams back to back (one per rank or flush), or raw."""
    import bz2
    import zlib

    from iolens.ingest import darshan_region

    monkeypatch.setattr(darshan_region, "_READ_STEP", 1000)  # many partial reads
    rng = np.random.default_rng(3)
    parts = [rng.integers(0, 5, 7000, dtype=np.uint8).tobytes() for _ in range(3)]
    pack = {0: zlib.compress, 1: bz2.compress, 2: lambda b: b}[comp]
    blob = b"".join(pack(p) for p in parts)
    path = tmp_path / "region"
    path.write_bytes(b"x" * 10 + blob + b"trailing")
    region = darshan_region.Region(path, 10, len(blob), comp, "region", "TEST")
    got = b""
    while (chunk := region.read(333, allow_end=True)) is not None:
        got += chunk
    want = b"".join(parts)
    assert got == want[: len(want) // 333 * 333]


def test_shared_records_of_a_huge_job_stay_bounded(tmp_path, monkeypatch):
    """example.darshan's shared file (2,048 ranks) with the bound lowered to 64 shares:
    fewer rows, the same bytes and ops."""
    monkeypatch.setattr(darshan_counters, "SPREAD_ROWS", 64)
    with _store(tmp_path / "s.duckdb") as store:
        imp.import_logs(store, [_LOG])
        rows = _count(store, "client_io")
        rep = report.build(store, "4478544")
    assert rows < 600
    truth = _counter_truth([str(_LOG)])
    assert {k: getattr(rep, k) for k in truth} == truth


# -- per-rank attribution of shared records (issue 21) ------------------------------------


def _shared_counters(log: Path, module: str, prefix: str) -> Any:
    """The log's shared records with bytes, read by PyDarshan (independent of iolens)."""
    r = darshan.DarshanReport(str(log), read_all=False)
    r.mod_read_all_records(module)
    d = r.records[module].to_df()
    c = d["counters"].join(d["fcounters"].drop(columns=["id", "rank"]))
    c["path"] = c["id"].map(r.name_records)
    c["bytes"] = c[f"{prefix}_BYTES_READ"] + c[f"{prefix}_BYTES_WRITTEN"]
    return c[(c["rank"] == -1) & (c["bytes"] > 0)].set_index("path")


def _rank_bytes(store: DuckDBStore, job: str, layer: str, path: str) -> dict[int, int]:
    sql = (
        "SELECT rank, sum(size * count)::BIGINT AS b FROM client_io JOIN files USING (file_id) "
        f"WHERE job_id = '{job}' AND layer = '{layer}' AND path = '{path}' "
        "AND op IN ('read', 'write') GROUP BY rank"
    )
    t = store.query(sql).to_pydict()
    return dict(zip(t["rank"], t["b"], strict=True))


def test_shared_file_bytes_go_to_the_ranks_darshan_names(examples_db):
    """MACSio (16 ranks, no DXT): rank 0, the one aggregator, wrote 92.9 MB of the
    94.4 MB shared HDF5 file. The stored rows give rank 0 and the fastest rank exactly
    the bytes their counters hold, and the 1.5 MB left to the few ranks the byte variance
    allows (an even split gave each of the 16 ranks 5.9 MB)."""
    log = EXAMPLES / "example_logs" / MACSIO_LOG
    truth = _shared_counters(log, "POSIX", "POSIX")
    h5 = "/tmp/test/macsio_hdf5_000.h5"
    rec = truth.loc[h5]
    with _store(examples_db[0]) as store:
        per = _rank_bytes(store, "29959", "posix", h5)
    assert sum(per.values()) == rec["bytes"]
    assert per[int(rec["POSIX_SLOWEST_RANK"])] == rec["POSIX_SLOWEST_RANK_BYTES"]
    assert per[int(rec["POSIX_FASTEST_RANK"])] == rec["POSIX_FASTEST_RANK_BYTES"]
    rest = [r for r in per if r not in (rec["POSIX_SLOWEST_RANK"], rec["POSIX_FASTEST_RANK"])]
    assert 1 <= len(rest) < 14  # the variance allows 8 ranks, not the 14 others
    # the variance the shares imply is the one Darshan measured (population, 16 ranks)
    x = np.zeros(16)
    for r, b in per.items():
        x[r] = b
    assert x.var() == pytest.approx(rec["POSIX_F_VARIANCE_RANK_BYTES"], rel=0.15)


def test_an_op_count_is_not_a_process_count(examples_db):
    """sample-badost (2,048 ranks): rank 0 alone wrote the 1,929 B of a shared stdio file
    in 96 writes (STDIO_SLOWEST_RANK_BYTES = all of it). An even split over min(ops,
    nprocs) ranks made 96 "processes" share it; the rows now name rank 0 only."""
    log = EXAMPLES / "example_logs" / "sample-badost.darshan"
    truth = _shared_counters(log, "STDIO", "STDIO")
    lone = truth[truth["STDIO_SLOWEST_RANK_BYTES"] == truth["bytes"]]
    assert len(lone)
    job = str(darshan.DarshanReport(str(log), read_all=False).metadata["job"]["jobid"])
    with _store(examples_db[0]) as store:
        for path, rec in lone.iterrows():
            per = _rank_bytes(store, job, "stdio", str(path))
            assert per == {int(rec["STDIO_SLOWEST_RANK"]): int(rec["bytes"])}, path
