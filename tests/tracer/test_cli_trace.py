"""End to end: `iolens trace -- CMD` then `iolens job ID --json` shows the workload's own
byte and op counts (issue 3's acceptance check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from iolens.model.schema import MDS_OPS
from tests.conftest import run_cli
from tests.tracer.conftest import needs_cc

pytestmark = needs_cc


@pytest.mark.parametrize("mode,n", [("fork", 3), ("threads", 4), ("stdio", 1), ("meta", 50)])
def test_iolens_job_shows_exact_counts(mode, n, tracer_lib, workload, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env["IOLENS_LIBRARY"] = str(tracer_lib)
    db = str(tmp_path / "db.duckdb")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolens",
            "trace",
            "--db",
            db,
            "--job-id",
            f"t-{mode}",
            "--",
            str(workload),
            mode,
            str(base),
            str(n),
        ],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in res.stdout.decode().splitlines() if x.startswith("{")]
    lines = [x for x in lines if "pid" in x]
    job = json.loads(run_cli("job", f"t-{mode}", "--db", db, "--json", env=env).stdout)
    # each process's report is one write() of its line to stdout, traced too
    stdout_bytes = sum(len(x) + 1 for x in res.stdout.decode().splitlines() if '"pid"' in x)
    assert job["read_bytes"] == sum(x["read_bytes"] for x in lines)
    assert job["write_bytes"] == sum(x["write_bytes"] for x in lines) + stdout_bytes
    assert job["read_ops"] == sum(x["ops"]["read"] for x in lines)
    assert job["write_ops"] == sum(x["ops"]["write"] for x in lines) + len(lines)
    # the workload reports only the ops it calls (none of format 6's)
    assert job["md_ops"] == sum(x["ops"].get(op, 0) for x in lines for op in MDS_OPS)
    assert job["nprocs"] == len(lines)
