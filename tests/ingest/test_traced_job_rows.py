"""A job known only from its traces, shipped one process at a time as the agent does.

Each process's trace is its own batch, and a batch only adds a job nobody reported, so
the stored row first describes the first process loaded. The analysis must widen it to
all the processes before it reports (found on the MooseFS lab, where `mpirun` jobs have
no scheduler: a 1-ms launcher process stood for a whole job). Real processes under the
real tracer; ground truth is each process's own trace.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from iolens.analyze.pipeline import analyze_jobs
from iolens.ingest.load import load_many
from iolens.store import open_store, queries
from iolens.tracefile import batch_of, decode_dir
from tests.tracer.conftest import needs_cc, tracer_lib  # noqa: F401  (fixture)

pytestmark = needs_cc

JOB = "traced-only-1"


def _traced(lib: Path, spool: Path, out: Path, mib: int) -> None:
    env = {**os.environ, "LD_PRELOAD": str(lib), "IOLENS_SPOOL": str(spool),
           "IOLENS_JOB_ID": JOB}  # fmt: skip
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={out}", "bs=1M", f"count={mib}", "status=none"],
        env=env, check=True, timeout=60,
    )  # fmt: skip


def _two_processes(lib: Path, tmp_path: Path) -> list:
    spool = tmp_path / "spool"
    spool.mkdir()
    _traced(lib, spool, tmp_path / "a", 2)  # a short first process ...
    time.sleep(1.2)
    _traced(lib, spool, tmp_path / "b", 8)  # ... and a later, bigger one
    traces = sorted(decode_dir(spool), key=lambda t: t.client_io.column("t_start")[0].as_py())
    assert len(traces) == 2
    return traces


def test_analysis_widens_a_trace_only_job_to_all_its_processes(
    tracer_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    traces = _two_processes(tracer_lib, tmp_path)
    first_start = min(t.client_io.column("t_start")[0].as_py() for t in traces)
    last_end = max(max(t.client_io.column("t_end").to_pylist()) for t in traces)
    with open_store(str(tmp_path / "s.duckdb"), create=True) as store:
        for t in traces:  # one batch per process, as the agent ships them
            load_many(store, [batch_of(t)])
        row = queries.job(store, JOB)
        assert row["nprocs"] == 1  # the first process's view, until the analysis
        analyze_jobs(store, [JOB])
        row = queries.job(store, JOB)
        summary = store.query(
            "SELECT write_bytes FROM job_summaries WHERE job_id = ?", [JOB]
        ).to_pylist()
    assert row["nprocs"] == 2
    assert row["start"] <= first_start and row["end"] >= last_end
    assert summary[0]["write_bytes"] == 10 * 2**20  # both processes' bytes, not the first's


def test_a_scaled_out_datasets_view_shows_the_widened_row(
    tracer_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A dataset's jobs table belongs to its ingest servers (read-only to the analysis):
    the widened row goes to `traced_jobs`, the jobs view reads through it, and a new
    reader of the published results sees it too."""
    from iolens.ingest.load import load_segments
    from iolens.store.dataset import DatasetStore
    from iolens.store.segments import SegmentWriter

    traces = _two_processes(tracer_lib, tmp_path)
    first_start = min(t.client_io.column("t_start")[0].as_py() for t in traces)
    last_end = max(max(t.client_io.column("t_end").to_pylist()) for t in traces)
    root = tmp_path / "ds"
    with SegmentWriter(root, "g1", fsync=False) as w:
        for t in traces:
            load_segments(w, [batch_of(t)])
    with DatasetStore(root) as ds:
        assert queries.job(ds, JOB)["nprocs"] == 1  # the segments hold the first process's
        analyze_jobs(ds, [JOB])
        summary = ds.query(
            "SELECT write_bytes FROM job_summaries WHERE job_id = ?", [JOB]
        ).to_pylist()
        analyze_jobs(ds, [JOB])  # again: one widened row, not two
        assert ds.query("SELECT count(*) AS n FROM traced_jobs").to_pylist() == [{"n": 1}]
    assert summary and summary[0]["write_bytes"] == 10 * 2**20
    with DatasetStore(root, read_only=True) as fresh:
        row = queries.job(fresh, JOB)
    assert row["nprocs"] == 2 and row["source"] == "tracer"
    assert row["start"] <= first_start and row["end"] >= last_end
