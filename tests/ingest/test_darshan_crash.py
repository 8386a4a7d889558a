"""Darshan logs that crash libdarshan-util (issue 19): read in the importer's own process
they killed the whole import; decoded in a worker process, a crash costs that log alone.

The fixtures are real example logs with a few bytes damaged (`data/darshan-crash/
PROVENANCE.md`); the good logs around them are PyDarshan's examples.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import darshan
import pytest

from iolens.ingest import darshan_decode
from iolens.ingest.importers import darshan as imp
from iolens.store import DuckDBStore
from tests.conftest import run_cli

CRASH = Path(__file__).parent / "data" / "darshan-crash"
ABORT = CRASH / "abort-namehash.darshan"
SEGV = CRASH / "segv-posix.darshan"
EXAMPLES = Path(darshan.__file__).parent / "examples" / "example_logs"


def _in_process(log: Path) -> subprocess.CompletedProcess[str]:
    """What the importer did before: libdarshan-util in the importing process."""
    code = "import sys; from iolens.ingest.darshan_reader import read_log; read_log(sys.argv[1])"
    return subprocess.run(
        [sys.executable, "-c", code, str(log)], capture_output=True, text=True, timeout=120
    )


def test_the_fixture_kills_a_process_that_reads_it_in_process() -> None:
    res = _in_process(ABORT)
    assert res.returncode == -signal.SIGABRT, (res.returncode, res.stderr[-500:])
    assert "darshan_log_get_filtered_namehash" in res.stderr


def _batch(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(EXAMPLES / "example.darshan", logs / "a-good.darshan")
    shutil.copy(ABORT, logs / "b-abort.darshan")
    shutil.copy(SEGV, logs / "c-segv.darshan")
    shutil.copy(EXAMPLES / "dxt.darshan", logs / "d-good-dxt.darshan")
    return logs


def test_a_crashing_log_costs_only_itself(tmp_path: Path) -> None:
    logs = _batch(tmp_path)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        results = {r.path.name: r for r in imp.import_logs(store, [logs])}
        jobs = store.query("SELECT DISTINCT job_id FROM client_io ORDER BY 1").column(0)
        stored = {j: n for j, n in store.query("SELECT job_id, count(*) FROM jobs GROUP BY 1")}
    assert results["a-good.darshan"].status == "imported"
    assert results["d-good-dxt.darshan"].status == "imported"
    assert results["d-good-dxt.darshan"].client_io > 1000  # its DXT, streamed after the crash
    assert len(jobs.to_pylist()) == 2 and len(stored) == 2
    crashed = results["b-abort.darshan"]
    assert crashed.status == "failed"
    assert crashed.error.startswith(f"{logs / 'b-abort.darshan'}: ")
    assert "libdarshan-util crashed (SIGABRT) reading it" in crashed.error
    assert "Assertion" in crashed.error  # the library's last words
    # depending on the heap, a segfault or a clean refusal: never the batch's end
    segv = results["c-segv.darshan"]
    assert segv.status == "failed" and segv.error.startswith(str(logs / "c-segv.darshan"))
    assert "corrupt Darshan log" in segv.error


def test_the_worker_is_replaced_after_a_crash_and_started_once_otherwise(tmp_path: Path) -> None:
    with darshan_decode.DecoderPool() as pool:
        for log in ("example.darshan", "noposix.darshan"):
            assert pool.decode(EXAMPLES / log).job.job_id
        assert pool.started == 1
        with pytest.raises(Exception, match=r"crashed \(SIGABRT\)"):
            pool.decode(ABORT)
        assert pool.decode(EXAMPLES / "dxt.darshan").modules
        assert pool.started == 2


def test_import_darshan_prints_one_line_for_the_crash(tmp_path: Path) -> None:
    logs = _batch(tmp_path)
    db = tmp_path / "cli.duckdb"
    res = run_cli("import", "darshan", str(logs), "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)
    assert summary["imported"] == 2 and summary["failed"] == 2
    crash = [f for f in summary["failures"] if f["path"].endswith("b-abort.darshan")]
    assert "libdarshan-util crashed (SIGABRT)" in crash[0]["error"]
    assert "Traceback" not in res.stderr


def test_the_cli_starts_the_worker_early_with_the_same_modules(monkeypatch) -> None:
    """`iolens import darshan` starts the forkserver before its own imports; a different
    module list would be ignored (the server already runs) and the workers would miss it."""
    from multiprocessing import forkserver

    from iolens.present.cli import darshan_import

    calls: list[object] = []
    monkeypatch.setattr(forkserver, "set_forkserver_preload", calls.append)
    monkeypatch.setattr(forkserver, "ensure_running", lambda: calls.append("started"))
    darshan_import._start_decoder()
    assert calls == [darshan_decode.PRELOAD, "started"]


def _segments(records: Any) -> list[Any]:
    return [
        (rec.id, rec.rank, rec.hostname, op, w.tolist())
        for rec in records
        for op, windows in rec.ops()
        for w in windows
    ]


def test_dxt_read_whole_in_the_worker_matches_the_stream(monkeypatch) -> None:
    """When the region map is unknown (another libdarshan-util handle layout), the worker
    reads DXT through the library and sends it whole: the same segments as the stream."""
    from iolens.ingest.darshan_reader import DarshanLog

    log = EXAMPLES / "dxt.darshan"
    with DarshanLog(log) as direct:
        streamed = _segments(direct.dxt("DXT_POSIX"))
    real = DarshanLog._check_regions

    def unknown_layout(self: DarshanLog) -> None:
        real(self)
        self._maps = None

    monkeypatch.setattr(DarshanLog, "_check_regions", unknown_layout)
    for call in ("ftruncate", "lseek"):  # leave pytest's fd 2 alone
        monkeypatch.setattr(darshan_decode.os, call, lambda *a: None)
    decoded = darshan_decode._decode(str(log), True)
    assert isinstance(decoded, darshan_decode.Decoded) and decoded.maps is None
    assert streamed and _segments(decoded.dxt("DXT_POSIX")) == streamed


def test_prefetched_logs_are_blamed_for_their_own_crash_only() -> None:
    with darshan_decode.DecoderPool() as pool:
        pool.decode(EXAMPLES / "example.darshan")
        pool.prefetch(ABORT)  # decoded (and crashing) while the importer does other work
        with pytest.raises(Exception, match=r"crashed \(SIGABRT\)"):
            pool.decode(ABORT)
        pool.prefetch(ABORT)  # handed over, then not asked for: out of the way, unblamed
        assert pool.decode(EXAMPLES / "noposix.darshan").job.job_id
        assert pool.started == 3


def test_a_worker_the_library_failed_in_gets_no_new_log(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.darshan"
    truncated.write_bytes((EXAMPLES / "example.darshan").read_bytes()[:3000])
    with darshan_decode.DecoderPool() as pool:
        with pytest.raises(Exception, match="truncated Darshan log"):
            pool.decode(truncated)
        assert pool.started == 1
        assert pool.decode(EXAMPLES / "dxt.darshan").modules
        assert pool.started == 2
