"""A traced MPI job's I/O is its ranks' I/O on its own files.

`mpiio_bench` (tests/cluster/progs) runs under `mpirun -np 4` with the tracer. Every
process, `mpirun` included, also reads system files: hwloc scans /sys and /proc, the
launcher reads /usr/share/misc/pci.ids. Counted, they made a 32-rank file-per-process run
on the MooseFS lab "33 processes, N-M", its application `orterun`, and gave every MPI job
~900 metadata ops per rank. Ground truth is the program's own arguments: the files it
writes (one per rank, or one shared), their bytes, and the ranks. Skips without MPI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from iolens.analyze import report
from iolens.analyze.pipeline import analyze_jobs
from iolens.ingest.load import load_many
from iolens.model.schema import MDS_OPS
from iolens.model.system_files import SYSTEM_PREFIXES
from iolens.store import open_store
from iolens.tracefile import batch_of, decode_dir
from iolens.tracefile.batch import LAUNCHERS
from tests.tracer.mpi import mpi_env, mpicc, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
RANKS, KIB, BLOCKS = 4, 64, 16


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mpiio_bench") / "mpiio_bench"
    return mpicc(ROOT / "tests" / "cluster" / "progs" / "mpiio_bench.c", out)


def _run(exe: Path, lib: Path, tmp: Path, mode: str) -> tuple[report.JobReport, list, set[str]]:
    """The job's report, its processes' traces, and the codes of its findings."""
    job = f"mode-{mode}"
    spool, out = tmp / "spool", tmp / "out"
    out.mkdir()
    res = subprocess.run(
        ["mpirun", "-np", str(RANKS), str(exe), mode, str(out), str(KIB), str(BLOCKS)],
        capture_output=True, text=True, timeout=300,
        env=mpi_env(lib, spool, IOLENS_JOB_ID=job),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    traces = list(decode_dir(spool))
    with open_store(str(tmp / "s.duckdb"), create=True) as store:
        load_many(store, [batch_of(t) for t in traces])
        codes = {f.code for f in analyze_jobs(store, [job])}
        rep = report.build(store, job)
    return rep, traces, codes


def _md_ops(traces: list, system: bool) -> int:
    """Metadata ops the ranks' traces hold on system files, or on the others (the job's
    files, its directories, the streams)."""
    n = 0
    for t in traces:
        if Path(t.exe).name in LAUNCHERS:
            continue
        paths = dict(zip(t.files["file_id"].to_pylist(), t.files["path"].to_pylist(), strict=True))
        md = t.client_io.filter(pc.is_in(t.client_io["op"], pa.array(MDS_OPS)))
        for fid, count in zip(md["file_id"].to_pylist(), md["count"].to_pylist(), strict=True):
            path = paths.get(fid) or ""
            if path.startswith(SYSTEM_PREFIXES) == system:
                n += count
    return n


@needs_mpi
@pytest.mark.parametrize(("mode", "io_mode", "files"), [("nn", "N-N", RANKS), ("n1", "N-1", 1)])
def test_the_job_is_its_ranks_on_their_files(bench, tracer_lib, tmp_path, mode, io_mode, files):
    rep, traces, codes = _run(bench, tracer_lib, tmp_path, mode)
    assert any(Path(t.exe).name in LAUNCHERS for t in traces)  # mpirun was traced ...
    assert rep.app == "mpiio_bench" and rep.nprocs == RANKS  # ... and is no part of the job
    assert rep.io_mode == io_mode and rep.io_procs == RANKS
    out = str(tmp_path / "out") + "/"
    data = [f for f in rep.top_files if f["path"].startswith(out) and f["path"].endswith(".dat")]
    assert len(data) == files
    # no system file, no stream; but MPI's own files are I/O of the ranks, as Darshan would
    # record them too: Open MPI's session directory (a shared-file-pointer file), and on
    # some file systems ROMIO's lock file beside a shared file (`n1.0.dat-<id>-<pid>.lock`)
    assert all(
        "/ompi." in f["path"] or f["path"].endswith(".lock") for f in rep.top_files if f not in data
    )
    assert rep.files == len(rep.top_files)
    assert sum(f["write_bytes"] for f in data) == RANKS * KIB * 1024 * BLOCKS
    assert sum(f["read_bytes"] for f in data) == RANKS * KIB * 1024 * BLOCKS
    own, system = _md_ops(traces, False), _md_ops(traces, True)
    assert system > 10 * own  # the ranks did scan /sys and /proc ...
    assert 0 < rep.md_ops <= own  # ... which is not the job's metadata load
    assert "IOL005" not in codes
