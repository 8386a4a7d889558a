"""The HDF5 layer: real programs under the real tracer, compared with their own counts.

(a) workloads/hdf5_io.c linked with Debian's libhdf5 (libhdf5-dev; skips without h5cc),
(b) workloads/h5py_io.py under h5py, whose wheel bundles a libhdf5 that Python loads
RTLD_LOCAL, out of RTLD_NEXT's reach (the interpreter is IOLENS_TEST_H5PY_PYTHON, else
this one; skips when neither imports h5py). Each program prints the dataset bytes it
wrote and read; the HDF5 layer must show exactly those, with the POSIX records the
library issued still recorded below on the same file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from iolens.analyze import report
from iolens.ingest.load import load
from iolens.store import DuckDBStore
from iolens.tracefile import TraceFile, batch_of, decode_dir
from tests.conftest import run_cli
from tests.tracer.conftest import HERE, expected, paths_of, run, traced

N = 100_000  # doubles in the dataset: 800 kB, above HDF5's small-data paths
needs_h5cc = pytest.mark.skipif(
    shutil.which("h5cc") is None, reason="no HDF5 C compiler wrapper (Debian: libhdf5-dev)"
)


def _h5py_python() -> str | None:
    for exe in (os.environ.get("IOLENS_TEST_H5PY_PYTHON"), sys.executable):
        if exe and subprocess.run([exe, "-c", "import h5py"], capture_output=True).returncode == 0:
            return exe
    return None


def _traced(cmd: list[str], lib: Path, tmp: Path, job: str) -> tuple[dict, list[TraceFile]]:
    spool = tmp / "spool"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env.update(LD_PRELOAD=str(lib), IOLENS_SPOOL=str(spool), IOLENS_JOB_ID=job)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout), list(decode_dir(spool))


def _rows(traces: list[TraceFile], path: Path) -> list[dict]:
    out = []
    for t in traces:
        paths = paths_of(t)
        out += [r for r in t.client_io.to_pylist() if paths[r["file_id"]] == str(path)]
    return out


def _bytes(rows: list[dict], layer: str, op: str) -> int:
    return sum(r["size"] * r["count"] for r in rows if r["layer"] == layer and r["op"] == op)


@pytest.fixture(scope="module")
def c_run(tracer_lib: Path, tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("h5cc") is None:
        pytest.skip("no HDF5 C compiler wrapper (Debian: libhdf5-dev)")
    tmp = tmp_path_factory.mktemp("hdf5")
    exe = tmp / "hdf5_io"
    # -shlib: a shared libhdf5 (h5cc links the static one by default, which no
    # LD_PRELOAD tracer can interpose)
    res = subprocess.run(
        ["h5cc", "-shlib", "-O2", "-o", str(exe), str(HERE / "workloads" / "hdf5_io.c")],
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    assert res.returncode == 0, res.stderr
    data = tmp / "data.h5"
    truth, traces = _traced([str(exe), str(data), str(N)], tracer_lib, tmp, "hdf5-job")
    return data, truth, traces


@needs_h5cc
def test_hdf5_layer_bytes_are_the_programs(c_run):
    data, truth, traces = c_run
    rows = _rows(traces, data)
    assert _bytes(rows, "hdf5", "write") == truth["written"]
    assert _bytes(rows, "hdf5", "read") == truth["read"]
    ops = Counter()
    for r in rows:
        if r["layer"] == "hdf5":
            ops[r["op"]] += r["count"]
    # H5Fcreate + H5Fopen, H5Fclose x 2, one H5Fflush, H5Dcreate2 + H5Dopen2 (as stat),
    # two H5Dwrite and two H5Dread
    assert ops == Counter(open=2, close=2, flush=1, stat=2, write=2, read=2)
    # a selection has no byte offset in the file: the POSIX records below carry them
    assert {r["offset"] for r in rows if r["layer"] == "hdf5"} == {-1}


@needs_h5cc
def test_posix_records_below_hdf5_share_the_file(c_run):
    data, truth, traces = c_run
    rows = _rows(traces, data)
    # the library wrote the raw data plus its own metadata: at least the dataset bytes
    assert _bytes(rows, "posix", "write") >= truth["written"]
    assert _bytes(rows, "posix", "read") >= truth["read"]
    h5 = [r for r in rows if r["layer"] == "hdf5" and r["op"] == "write"]
    px = [r for r in rows if r["layer"] == "posix" and r["op"] == "write" and r["size"] > 4096]
    assert h5 and px
    # the big POSIX writes lie inside the H5Dwrite calls' span (or the flush/close after)
    assert min(r["t_start"] for r in h5) <= min(r["t_start"] for r in px)


@needs_h5cc
def test_report_and_job_command_show_the_hdf5_layer(c_run, tmp_path):
    data, truth, traces = c_run
    db = tmp_path / "db.duckdb"
    with DuckDBStore(db) as store:
        for t in traces:
            load(store, batch_of(t))
        rep = report.build(store, "hdf5-job")
        posix = _bytes(_rows(traces, data), "posix", "write")
    assert rep.io_layers["hdf5"]["write_bytes"] == truth["written"]
    assert rep.io_layers["hdf5"]["read_bytes"] == truth["read"]
    top = next(f for f in rep.top_files if f["path"] == str(data))
    assert top["write_bytes"] == max(posix, truth["written"])  # one layer, never both
    res = run_cli("job", "hdf5-job", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["io_layers"]["hdf5"]["write_bytes"] == truth["written"]
    human = run_cli("job", "hdf5-job", "--db", str(db))
    assert res.returncode == 0, human.stderr
    assert "traced hdf5" in human.stdout


def test_h5py_with_its_own_libhdf5(tracer_lib: Path, tmp_path: Path):
    python = _h5py_python()
    if python is None:
        pytest.skip("h5py is not installed (pip install h5py, or IOLENS_TEST_H5PY_PYTHON)")
    data = tmp_path / "py.h5"
    truth, traces = _traced(
        [python, str(HERE / "workloads" / "h5py_io.py"), str(data), str(N)],
        tracer_lib,
        tmp_path,
        "h5py-job",
    )
    rows = _rows(traces, data)
    assert _bytes(rows, "hdf5", "write") == truth["written"]
    assert _bytes(rows, "hdf5", "read") == truth["read"]
    assert _bytes(rows, "posix", "write") >= truth["written"]
    assert sum(r["count"] for r in rows if r["layer"] == "hdf5" and r["op"] == "open") == 2


def test_program_without_hdf5_resolves_no_hdf5_symbol(tracer_lib: Path, workload, tmp_path: Path):
    """The wrappers are inert until HDF5 is called: the dynamic linker never looks an H5
    name up for a program that does not use HDF5, and its I/O is traced as before."""
    r = run(
        workload,
        "nn",
        tmp_path,
        lib=tracer_lib,
        env={"LD_DEBUG": "symbols", "LD_DEBUG_OUTPUT": str(tmp_path / "ld")},
    )
    assert r.rc == 0, r.stderr
    log = "".join(p.read_text() for p in tmp_path.glob("ld.*"))
    assert "symbol=malloc" in log  # the debug log works
    assert "symbol=H5" not in log and "symbol=ncmpi" not in log
    traces = r.traces()
    assert traced(traces, r.base) == expected(r)  # the workload's own counts, as before
    layers = {row["layer"] for t in traces for row in t.client_io.to_pylist()}
    assert layers <= {"posix", "stdio"}
