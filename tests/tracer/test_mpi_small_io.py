"""IOL004 on real traced MPI jobs: what collective calls would save on a shared file.

`mpiio_bench` (tests/cluster/progs) runs under `mpirun -np 4` with the tracer: 4 KiB
blocks to one shared file with independent calls (`n1i`), and the same to a file per
process (`nn`). Ground truth is the program's own arguments: ranks x blocks writes, as
many reads. On a shared file IOL004 also says what collective calls would save, counting
the MPI-IO calls left as one per call of all ranks; on files per process it does not
(collective calls there merge nothing). Whether the figure is right is measured on the
MooseFS lab (`bench/lab_savings.py --cases cb`, docs/accuracy.md). Skips without MPI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from iolens.analyze.pipeline import analyze_jobs
from iolens.ingest.load import load_many
from iolens.store import open_store
from iolens.tracefile import batch_of, decode_dir
from tests.tracer.mpi import mpi_env, mpicc, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
RANKS, BLOCKS = 4, 1500  # 12,000 MPI-IO data calls: over IOL004's 10,000


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mpiio_bench") / "mpiio_bench"
    return mpicc(ROOT / "tests" / "cluster" / "progs" / "mpiio_bench.c", out)


def _iol004(exe: Path, lib: Path, tmp: Path, mode: str) -> dict:
    job = f"small-{mode}"
    spool, out = tmp / "spool", tmp / "out"
    out.mkdir()
    res = subprocess.run(
        ["mpirun", "-np", str(RANKS), str(exe), mode, str(out), "4", str(BLOCKS)],
        capture_output=True, text=True, timeout=300,
        env=mpi_env(lib, spool, IOLENS_JOB_ID=job),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    with open_store(str(tmp / "s.duckdb"), create=True) as store:
        load_many(store, [batch_of(t) for t in decode_dir(spool)])
        found = {f.code: f for f in analyze_jobs(store, [job])}
    assert "IOL004" in found, sorted(found)
    return found["IOL004"].gain or {}


@needs_mpi
def test_a_shared_file_gets_the_collective_figure(bench, tracer_lib, tmp_path):
    gain = _iol004(bench, tracer_lib, tmp_path, "n1i")
    inputs = gain["inputs"]
    mpi_calls = 2 * RANKS * BLOCKS  # the program's own writes and reads
    others = inputs["calls"] - mpi_calls
    assert 0 <= others < mpi_calls  # start-up reads and the like, left as they are
    assert inputs["calls_collective"] == others + mpi_calls // RANKS
    assert inputs["calls_after"] < inputs["calls_collective"]  # 1 MiB requests merge more
    assert 0 < inputs["collective_s"] < gain["seconds"]
    assert "collective ones would merge" in gain["model"]


@needs_mpi
def test_files_per_process_do_not(bench, tracer_lib, tmp_path):
    gain = _iol004(bench, tracer_lib, tmp_path, "nn")
    assert gain["seconds"] > 0 and "collective_s" not in gain["inputs"]
