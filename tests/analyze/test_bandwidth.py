"""One bandwidth per job (issue 21): bytes / I/O time of the slowest rank.

Held to darshan-util's own figure (PyDarshan 3.5's accumulator, what `darshan-parser
--perf` prints as agg_perf_by_slowest) on every real log, and to what real programs run
under the tracer print about themselves: `dd`, a Python program and an MPI program that,
like MPI-IO Test, divide the bytes by the slowest rank's time inside its calls.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from importlib.resources import files
from pathlib import Path

import pytest

from iolens.analyze import report
from iolens.analyze.bandwidth import STREAMS, of_calls, of_darshan
from iolens.ingest.darshan_reader import read_log
from iolens.ingest.importers import darshan as imp
from iolens.ingest.load import load
from iolens.store import DuckDBStore
from iolens.tracefile import batch_of, decode_dir
from tests.conftest import SHARED_DATA, run_cli
from tests.traced import tracer_library

EXAMPLES = Path(str(files("darshan.examples.example_logs")))
VPIC = SHARED_DATA / "pytokio-lmt-and-lustre-cli" / "sample.darshan"
MPI_IO_TEST = SHARED_DATA / "darshan-logs" / "release_logs" / "mpi-io-test-x86_64-3.5.0.darshan"
TOLERANCE = 0.01  # within 1 % of the program's own figure
HERE = Path(__file__).parent


#: Logs of every kind the corpora hold: MPI-IO Test from three Darshan releases and two
#: architectures, VPIC-IO (2048 ranks), IOR over POSIX, HDF5, PnetCDF and DAOS DFS, IOR
#: with DXT, HDF5 through POSIX, a STDIO-only log, a 1-byte-write microbenchmark.
LOGS = (
    "darshan-logs/release_logs/mpi-io-test-ppc64-3.0.0.darshan",
    "darshan-logs/release_logs/mpi-io-test-x86_64-3.1.6.darshan",
    "darshan-logs/release_logs/mpi-io-test-x86_64-3.5.0.darshan",
    "darshan-logs/apmpi_apxc/mpi-io-test.darshan",
    "pytokio-lmt-and-lustre-cli/sample.darshan",
    "darshan-logs/ior_pnetcdf_hdf5/shane_ior-HDF5_id438090-438090_11-9-41522-17417065676046418211_1.darshan",
    "darshan-logs/ior_pnetcdf_hdf5/shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan",
    "darshan-logs/ior_daos/snyder_ior-POSIX_id1057716-202103_11-8-64415-6936117869459351096_1.darshan",
    "darshan-logs/ior_daos/snyder_ior-DFS_id4681120-53379_5-8-15060-3270540599978592154_1.darshan",
    "darshan-logs-generated/ior-dxt-1m.darshan",
    "darshan-logs/hdf5_diagonal_write_only/hdf5_diagonal_write_1_byte_dxt.darshan",
    "darshan-logs/apmpi/darshan-apmpi-2nodes-64mpi.darshan",
    "darshan-logs-generated/micro-posix.darshan",
)


def _logs() -> list[Path]:
    return [EXAMPLES / "ior_hdf5_example.darshan", *(SHARED_DATA / p for p in LOGS)]


def _perf(path: Path, module: str, nprocs: int) -> float | None:
    """darshan-util's agg_perf_by_slowest of one module of the log, in bytes/s."""
    darshan = pytest.importorskip("darshan")
    from darshan.backend.cffi_backend import accumulate_records

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = darshan.DarshanReport(str(path), read_all=False)
        if module not in r.modules:
            return None
        r.mod_read_all_records(module, dtype="pandas")
        recs = r.records[module]
        recs = recs[0] if isinstance(recs, list) else recs.to_df()
        # iolens leaves the standard streams out (a terminal, not the file system)
        names = r.name_records
        keep = [names.get(int(i), "") not in STREAMS for i in recs["counters"]["id"]]
        recs = {k: recs[k][keep].reset_index(drop=True) for k in ("counters", "fcounters")}
        if not len(recs["counters"]):
            return 0.0
        acc = accumulate_records(recs, module, nprocs)
    return float(acc.derived_metrics.agg_perf_by_slowest) * 2**20


@pytest.mark.parametrize("path", _logs(), ids=lambda p: p.name[:48])
def test_darshan_bandwidth_is_darshan_parsers_perf(path):
    """Wherever a job's files were accessed through one module, its bandwidth is exactly
    darshan-parser --perf's for that module (MPI-IO for MPI-IO Test, VPIC-IO, IOR-HDF5)."""
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    log = read_log(path, dxt=False)
    bw = of_darshan([log])
    if "+" in bw.layer or not bw.layer or bw.io_time_s >= log.run_time > 0:
        pytest.skip(f"files in several modules ({bw.layer or 'none'}) or clipped to the run")
    ref = _perf(path, bw.layer, log.nprocs)
    assert ref is not None
    assert bw.bw == pytest.approx(ref, rel=1e-9, abs=1e-9)


def test_io_time_never_exceeds_the_run():
    """dxt.darshan: one process whose counters hold 11,218 s of metadata time in 1,469 s."""
    log = read_log(EXAMPLES / "dxt.darshan", dxt=False)
    bw = of_darshan([log])
    assert bw.io_time_s == pytest.approx(log.run_time)
    assert bw.read_time_s <= log.run_time and bw.write_time_s <= log.run_time


def _store_with(tmp_path: Path, *logs: Path) -> DuckDBStore:
    for p in logs:
        if not p.is_file():
            pytest.skip(f"{p} is not available")
    store = DuckDBStore(tmp_path / "db.duckdb")
    results = imp.import_logs(store, list(logs))
    assert all(r.status == "imported" for r in results), [r.error for r in results]
    return store


def test_report_shows_darshans_figure_and_io_time_within_the_run(tmp_path):
    """VPIC-IO on Edison (2048 ranks, 2 TiB written collectively): the report used to say
    17.5 GiB/s over "118 s of I/O" in a 117-s run; darshan-parser says 24,530 MiB/s over
    the slowest rank's 85.5 s."""
    with _store_with(tmp_path, VPIC, MPI_IO_TEST) as store:
        vpic = report.build(store, "4478544")
        mit = report.build(store, "3171794")
    for rep, path in ((vpic, VPIC), (mit, MPI_IO_TEST)):
        ref = _perf(path, "MPI-IO", rep.nprocs or 1)
        assert rep.bandwidth["bw"] == pytest.approx(ref, rel=1e-6)
        assert "darshan-parser --perf" in rep.bandwidth["definition"]
        assert rep.bandwidth["layer"].startswith("MPI-IO")
        assert rep.io_time_s <= rep.runtime_s
        assert rep.write_bw_avg == pytest.approx(rep.bandwidth["write_bw"])
    assert vpic.io_time_s == pytest.approx(85.4922, abs=1e-3)
    # a write-only shared file: the write bandwidth is exact, 2 TiB / its slowest rank
    assert vpic.write_bw_avg == pytest.approx(2199023259968 / vpic.bandwidth["write_time_s"])
    assert vpic.write_bw_avg / 2**30 == pytest.approx(23.97, abs=0.05)


def test_cli_and_html_state_the_one_definition(tmp_path):
    with _store_with(tmp_path, MPI_IO_TEST):
        pass
    db = str(tmp_path / "db.duckdb")
    res = run_cli("job", "3171794", "--db", db)
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.replace("│", " ").split())
    assert "slowest rank (darshan-parser --perf" in text
    assert "avg / peak" not in text  # the per-second peak was a second "bandwidth"
    html = tmp_path / "r.html"
    res = run_cli("report", "3171794", "--html", str(html), "--db", db)
    assert res.returncode == 0, res.stderr
    page = html.read_text()
    assert 'id="bandwidth-definition"' in page and "darshan-parser --perf" in page


# --- traced programs: the tracer's per-call durations, never whole-second bins ---------


def _traced(tmp_path: Path, cmd: list[str], job: str, **extra: str) -> str:
    spool = tmp_path / "spool"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {"LD_PRELOAD": str(tracer_library()), "IOLENS_SPOOL": str(spool)}
    env |= {"IOLENS_JOB_ID": job, **extra}
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=True)
    return res.stdout + res.stderr


def _report_of(tmp_path: Path, job: str) -> report.JobReport:
    with DuckDBStore(tmp_path / "t.duckdb") as store:
        for t in decode_dir(tmp_path / "spool"):
            load(store, batch_of(t))
        return report.build(store, job)


def _dev(ours: float, theirs: float) -> float:
    return ours / theirs - 1.0


def test_traced_dd_is_its_own_figure(tmp_path):
    """dd prints bytes copied / the time of its copy loop (its reads and writes). The
    slowest (only) process's I/O time is that loop's time inside calls; binned into
    seconds, a 0.1-s dd used to read as its bytes / 1 s."""
    if shutil.which("dd") is None:
        pytest.skip("no dd")
    src = tmp_path / "src.dat"
    src.write_bytes(os.urandom(1 << 20) * 256)
    out = _traced(
        tmp_path,
        ["dd", f"if={src}", f"of={tmp_path / 'dd.dat'}", "bs=1M"],
        "dd-job",
        LC_ALL="C",
    )
    m = re.search(r"^(\d+) bytes .* copied, ([\d.e+-]+) s", out, re.M)
    assert m, out
    copied, secs = int(m[1]), float(m[2])
    rep = _report_of(tmp_path, "dd-job")
    assert rep.bandwidth["write_bytes"] == copied  # dd's data file; its stderr is no data
    assert abs(_dev(copied / rep.io_time_s, copied / secs)) < TOLERANCE
    # per direction: the writes alone, faster than the copy loop (which also read)
    assert rep.write_bw_avg == pytest.approx(copied / rep.bandwidth["write_time_s"])
    assert rep.write_bw_avg > copied / secs and rep.read_bw_avg > copied / secs


def _figures(out: str) -> tuple[float, float]:
    wb, wt, rb, rt = out.split()[-4:]
    return float(wb) / float(wt), float(rb) / float(rt)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_traced_program_per_direction(tmp_path):
    """A program timing each of its calls (as MPI-IO Test and IOR do): 128 MiB in 1-MiB
    calls of well under a millisecond, all inside one second (binned, the report said
    128 MiB/s whatever the speed). The program's clock reads sit just outside the
    tracer's, so the report can only be faster, by the wrapper's bookkeeping (~20 ns a
    call) and whatever preempted the program between a clock read and its call."""
    exe = tmp_path / "bandwidth_posix"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "bandwidth_posix.c")], check=True)
    out = _traced(tmp_path, [str(exe), str(tmp_path / "p.dat"), str(1 << 20), "128"], "c-job")
    w, r = _figures(out)
    rep = _report_of(tmp_path, "c-job")
    assert abs(_dev(rep.write_bw_avg, w)) < TOLERANCE, (rep.write_bw_avg, w)
    assert abs(_dev(rep.read_bw_avg, r)) < TOLERANCE, (rep.read_bw_avg, r)
    assert "slowest process" in rep.bandwidth["definition"]


@pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("mpirun") is None, reason="no MPI"
)
def test_traced_mpi_program_is_its_own_figure(tmp_path):
    """2 ranks, collective MPI-IO, timed at the MPI-IO calls like MPI-IO Test: the report
    times the same calls (the outermost layer; the launcher's reads of /sys are no part of
    the job's I/O), per rank, and takes the slowest.

    The tracer's clock reads sit inside the program's, so the report can only come out
    faster, by whatever kept a rank from its call after it read the clock: on a loaded
    2-core host a rank leaving a barrier is sometimes descheduled for ~10 ms (a 7 % error
    on a 150-ms read phase, seen once in four runs here). Up to three runs are made and
    one must agree within 1 %; none may be slower than the program says."""
    exe = tmp_path / "bandwidth_prog"
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(HERE / "bandwidth_prog.c")], check=True)
    seen = []
    for attempt in range(3):
        run = tmp_path / f"run{attempt}"
        run.mkdir()
        out = _traced(
            run,
            ["mpirun", "-np", "2", str(exe), str(run / "m.dat"), str(8 << 20), "8"],
            "mpi-job",
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
            OMPI_MCA_rmaps_base_oversubscribe="1",
        )
        w, r = _figures(out.strip().splitlines()[0])
        rep = _report_of(run, "mpi-job")
        assert rep.bandwidth["layer"].startswith("MPI-IO")
        dev = (_dev(rep.write_bw_avg, w), _dev(rep.read_bw_avg, r))
        seen.append(dev)
        assert min(dev) > -0.005, seen  # never slower than the program measured
        if max(dev) < TOLERANCE:
            break
    assert max(seen[-1]) < TOLERANCE, seen


def test_processes_one_after_another_add_up():
    """Two processes in sequence (a script running one tool then another) take the time of
    both; two at once take the slower one's."""
    import numpy as np

    def bw(t0b: float) -> float:
        return of_calls(
            np.array([1, 2]), np.array([10, 11]), np.array(["posix", "posix"], object),
            np.array([1, 1]), np.array([100.0, 100.0]), np.array([1.0, 1.0]),
            np.array([0.0, t0b]), np.array([1.0, t0b + 1.0]),
        ).io_time_s  # fmt: skip

    assert bw(5.0) == pytest.approx(2.0)
    assert bw(0.5) == pytest.approx(1.0)
