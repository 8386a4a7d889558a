"""The MPI-IO hint plug-in: injected hints reach the MPI library and the trace.

Runs a real MPI program (workloads/mpi_hints_open.c) under `mpirun -np 2` with
IOLENS_MPI_HINTS; the program itself asks the library for each file's effective hints
(MPI_File_get_info), which is the ground truth the trace's HINTS section is compared with.
Skips without an MPI compiler and launcher (Debian: openmpi-bin libopenmpi-dev).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.tracer.conftest import HERE
from tests.tracer.mpi import mpi_env, mpicc, needs_mpi

KEYS = ["cb_buffer_size", "romio_cb_write", "cb_nodes"]


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mpihints") / "mpi_hints_open"
    return mpicc(HERE / "workloads" / "mpi_hints_open.c", out)


def run(exe: Path, lib: Path, tmp: Path, **knobs: str) -> tuple[dict, dict, str]:
    """(effective hints the program saw per file, the trace's hints per file, stderr)."""
    from iolens.tracefile import decode_dir

    out, spool = tmp / "out", tmp / "spool"
    out.mkdir()
    env = mpi_env(lib, spool, **knobs)
    res = subprocess.run(
        ["mpirun", "-np", "2", str(exe), str(out), *KEYS],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    seen: dict[str, dict[str, str]] = {}
    for line in res.stdout.splitlines():
        tag, key, value = line.split()
        if value != "-":
            seen.setdefault(tag, {})[key] = value
    for name, times in (("null", 2), ("own", 1)):  # the data is intact
        data = (out / f"{name}.dat").read_bytes()
        assert data == (b"a" * 4096 + b"b" * 4096) * times
    traced = {}
    for t in decode_dir(spool):
        if t.exe.endswith("mpi_hints_open") and t.rank == 0:
            traced = {Path(p).stem: h for p, h in t.hints.items()}
    return seen, traced, res.stderr


@needs_mpi
def test_injected_hints_reach_the_library_and_the_trace(exe, tracer_lib, tmp_path):
    seen, traced, err = run(
        exe,
        tracer_lib,
        tmp_path,
        IOLENS_MPI_HINTS="cb_buffer_size=4194304; romio_cb_write=disable;bogus;cb_nodes=1",
    )
    # MPI_INFO_NULL open: the library got every well-formed hint
    assert seen["null"] == {
        "cb_buffer_size": "4194304",
        "romio_cb_write": "disable",
        "cb_nodes": "1",
    }
    # the application's own cb_buffer_size wins over the injected one
    assert seen["own"] == {
        "cb_buffer_size": "1048576",
        "romio_cb_write": "disable",
        "cb_nodes": "1",
    }
    # the trace records what the library reports, key for key
    assert traced == seen
    assert "ignoring 'bogus': no '='" in err


@needs_mpi
def test_match_limits_injection_to_matching_paths(exe, tracer_lib, tmp_path):
    seen, traced, _ = run(
        exe,
        tracer_lib,
        tmp_path,
        IOLENS_MPI_HINTS="romio_cb_write=disable",
        IOLENS_MPI_HINTS_MATCH="*/null.dat",
    )
    assert seen == {"null": {"romio_cb_write": "disable"}, "own": {"cb_buffer_size": "1048576"}}
    assert traced == seen


@needs_mpi
def test_off_by_default_and_all_malformed_is_off(exe, tracer_lib, tmp_path):
    for i, knobs in enumerate([{}, {"IOLENS_MPI_HINTS": "novalue;=x"}]):
        sub = tmp_path / str(i)
        sub.mkdir()
        seen, traced, _ = run(exe, tracer_lib, sub, **knobs)
        assert seen == {"own": {"cb_buffer_size": "1048576"}}
        assert traced == {"own": {"cb_buffer_size": "1048576"}}


# Hint sets the learning runs are launched with (None: no IOLENS_MPI_HINTS), oldest first.
PLAN = [None, "romio_cb_write=disable", "cb_buffer_size=4194304;cb_nodes=1"] * 2


@needs_mpi
def test_advise_learns_the_traced_hint_sets(exe, tracer_lib, tmp_path):
    """Real traced runs with different injected hints -> store -> `advise`: each run is
    filed under the hint set it was launched with, and the advice is the set whose runs
    had the best median bandwidth (recomputed here from job_summaries)."""
    import statistics

    from iolens.analyze.advise import NO_HINTS, advise
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.ingest.load import load
    from iolens.store import DuckDBStore
    from iolens.tracefile import batch_of, decode_dir

    expected: dict[str, list[str]] = {}
    with DuckDBStore(tmp_path / "db.duckdb") as store:
        for i, hints in enumerate(PLAN):
            sub = tmp_path / f"run{i}"
            sub.mkdir()
            knobs = {"IOLENS_JOB_ID": f"run{i}"} | ({"IOLENS_MPI_HINTS": hints} if hints else {})
            run(exe, tracer_lib, sub, **knobs)
            for t in decode_dir(sub / "spool"):
                if t.exe.endswith("mpi_hints_open"):
                    load(store, batch_of(t))
            expected.setdefault(hints or NO_HINTS, []).append(f"run{i}")
        stored = store.query("SELECT DISTINCT job_id, hints FROM mpi_hints").to_pylist()
        assert {r["hints"] for r in stored if r["job_id"] == "run1"} == {
            "cb_buffer_size=1048576;romio_cb_write=disable",  # own.dat: the app's value won
            "romio_cb_write=disable",
        }
        analyze_jobs(store)
        bw = {
            r["job_id"]: r["bw"]
            for r in store.query(
                "SELECT job_id, (read_bytes + write_bytes) / io_time_s AS bw FROM job_summaries"
            ).to_pylist()
        }
        rep = advise(store, "mpi_hints_open")
    judged = rep["settings"]["mpi_hints"]
    assert {s["setting"]: sorted(s["jobs"]) for s in judged["settings"]} == expected
    medians = {k: statistics.median(bw[j] for j in jobs) for k, jobs in expected.items()}
    assert judged["current"] == PLAN[-1]
    top = max(medians, key=medians.get)
    if medians[top] > medians[PLAN[-1]]:  # a better set than the current one: advised
        assert judged["best"] == top
        env = None if top == NO_HINTS else f"IOLENS_MPI_HINTS={shlex.quote(top)}"
        assert rep["mpi_hints_env"] == env
    else:
        assert judged["best"] == PLAN[-1] and judged["confidence"] == "keep"
        assert rep["mpi_hints_env"] == f"IOLENS_MPI_HINTS={shlex.quote(PLAN[-1])}"
