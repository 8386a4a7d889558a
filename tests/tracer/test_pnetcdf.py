"""The PnetCDF layer: a real MPI program (workloads/pnetcdf_io.c) under `mpirun -np 2`,
compared with each rank's own byte counts. Skips without mpicc/mpirun or PnetCDF
(Debian: openmpi-bin libopenmpi-dev libpnetcdf-dev pnetcdf-bin).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from iolens.analyze import report
from iolens.ingest.load import load
from iolens.store import DuckDBStore
from iolens.tracefile import batch_of, decode_dir
from tests.tracer.conftest import HERE, paths_of
from tests.tracer.mpi import mpi_env, mpicc

N = 10_000
NP = 2
needs_pnetcdf = pytest.mark.skipif(
    shutil.which("mpicc") is None
    or shutil.which("mpirun") is None
    or shutil.which("pnetcdf-config") is None,
    reason="no MPI (mpicc, mpirun) or no PnetCDF (Debian: libpnetcdf-dev)",
)


@pytest.fixture(scope="module")
def nc_run(tracer_lib: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("pnetcdf")
    exe = mpicc(HERE / "workloads" / "pnetcdf_io.c", tmp / "pnetcdf_io", "-lpnetcdf")
    data, spool = tmp / "data.nc", tmp / "spool"
    env = mpi_env(tracer_lib, spool, IOLENS_JOB_ID="nc-job")
    res = subprocess.run(
        ["mpirun", "-np", str(NP), str(exe), str(data), str(N)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    truth = {d["rank"]: d for d in (json.loads(x) for x in res.stdout.splitlines() if x[:1] == "{")}
    return data, truth, list(decode_dir(spool))


def _by_rank(traces, data: Path) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for t in traces:
        if t.rank is None or not t.exe.endswith("pnetcdf_io"):
            continue
        paths = paths_of(t)
        out[t.rank] = [r for r in t.client_io.to_pylist() if paths[r["file_id"]] == str(data)]
    return out


def _bytes(rows: list[dict], layer: str, op: str) -> int:
    return sum(r["size"] * r["count"] for r in rows if r["layer"] == layer and r["op"] == op)


@needs_pnetcdf
def test_pnetcdf_layer_bytes_are_each_ranks(nc_run):
    data, truth, traces = nc_run
    by_rank = _by_rank(traces, data)
    assert sorted(by_rank) == sorted(truth) == list(range(NP))
    for rank, rows in by_rank.items():
        assert _bytes(rows, "pnetcdf", "write") == truth[rank]["written"]
        assert _bytes(rows, "pnetcdf", "read") == truth[rank]["read"]
        ops = Counter()
        for r in rows:
            if r["layer"] == "pnetcdf":
                ops[r["op"]] += r["count"]
        # create + open, two closes, one sync; vara put x 2 and get x 2
        assert ops == Counter(open=2, close=2, fsync=1, write=2, read=2)
        # the MPI-IO and POSIX calls PnetCDF made are recorded below, on the same file
        assert _bytes(rows, "mpiio", "write") >= truth[rank]["written"]
    assert sum(_bytes(rows, "posix", "write") for rows in by_rank.values()) > 0


@needs_pnetcdf
def test_report_shows_the_pnetcdf_layer(nc_run, tmp_path):
    data, truth, traces = nc_run
    with DuckDBStore(tmp_path / "db.duckdb") as store:
        for t in traces:
            load(store, batch_of(t))
        rep = report.build(store, "nc-job")
    written = sum(t["written"] for t in truth.values())
    assert rep.io_layers["pnetcdf"]["write_bytes"] == written
    assert rep.io_layers["pnetcdf"]["read_bytes"] == sum(t["read"] for t in truth.values())
    top = next(f for f in rep.top_files if f["path"] == str(data))
    # counted at one layer, the one that moved the most: never PnetCDF + MPI-IO + POSIX
    rows = [r for rs in _by_rank(traces, data).values() for r in rs]
    per_layer = [_bytes(rows, layer, "write") for layer in ("posix", "mpiio", "pnetcdf")]
    assert top["write_bytes"] == max(per_layer)
