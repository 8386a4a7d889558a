"""IOL005 on real traced processes: a rate alone is not a metadata-heavy job.

A process that stats and opens a few hundred files within a second runs above 300
metadata ops/s during its I/O (so does any program starting up: Python's own imports make
about 2,000), yet puts no lasting load on a metadata server: the lab's 4-rank MPI-IO jobs
got IOL005 with 0.004-0.19 s "to save". A process creating, stat-ing and unlinking
thousands of files is the job the rule is for. Ground truth: each program's own count
of its calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from iolens.analyze.findings.iol005_metadata_heavy import MIN_OPS, MIN_RATE
from iolens.analyze.pipeline import analyze_jobs
from iolens.ingest.load import load_many
from iolens.store import open_store
from iolens.tracefile import batch_of, decode_dir
from tests.tracer.conftest import needs_cc, tracer_lib  # noqa: F401  (fixture)

pytestmark = needs_cc

#: files, then calls per file: create (open), close, stat, unlink; prints its call count
PROG = """
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for i in range(n):
    p = f"{d}/f{i}"
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
    os.stat(p)
    os.unlink(p)
print(4 * n)
"""


def _job(lib: Path, tmp: Path, job: str, files: int) -> tuple[int, dict, list[str]]:
    """The program's own call count, its stored summary and its finding codes."""
    spool = tmp / "spool"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {"LD_PRELOAD": str(lib), "IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": job}
    out = subprocess.run(
        [sys.executable, "-c", PROG, str(tmp / "d"), str(files)],
        env=env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    with open_store(str(tmp / "s.duckdb"), create=True) as store:
        load_many(store, [batch_of(t) for t in decode_dir(spool)])
        found = analyze_jobs(store, [job])
        summary = store.query(
            "SELECT md_ops, md_ops_rate FROM job_summaries WHERE job_id = ?", [job]
        ).to_pylist()[0]
    return int(out.stdout), summary, [f.code for f in found]


def test_a_start_up_burst_is_no_metadata_heavy_job(tracer_lib: Path, tmp_path: Path) -> None:  # noqa: F811
    calls, summary, codes = _job(tracer_lib, tmp_path, "burst-1", 300)
    assert calls <= summary["md_ops"] < MIN_OPS  # its own calls are all there
    assert summary["md_ops_rate"] > MIN_RATE  # the rate alone would have fired
    assert "IOL005" not in codes


def test_thousands_of_files_are(tracer_lib: Path, tmp_path: Path) -> None:  # noqa: F811
    calls, summary, codes = _job(tracer_lib, tmp_path, "storm-1", 3000)
    assert calls <= summary["md_ops"] and calls >= MIN_OPS
    assert summary["md_ops_rate"] > MIN_RATE
    assert "IOL005" in codes
