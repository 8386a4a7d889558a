"""The I/O seff line at the end of a real Slurm job step (issue 22, part 3).

The mini cluster installs the files `iolens site slurm-files` writes, with `SrunEpilog`
set to the seff epilog (scripts/minicluster.sh). A user's batch job writes 16 MiB in
synchronous 4 KiB writes in a traced step, waits until the server has its data, then runs
a second step whose task output goes to a file of its own: the epilog's line must appear
in the batch output (srun's stdout, not the task's), and be the server's line for this job.

A TaskEpilog was tried the same way and is not offered: slurmstepd discards its output
(the second step's task file stayed empty; only a TaskProlog's `print` lines are passed on).
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.cluster.harness import Cluster

pytestmark = pytest.mark.cluster

USER = "iolensa"


def _server_line(c: Cluster, job_id: str, token: str, timeout: float = 120) -> str:
    """The job's seff line once the server has its I/O (204 until then)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = httpx.get(
            f"{c.url}/api/v1/jobs/{job_id}/seff",
            params={"format": "line"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        if r.status_code == 200:
            return r.text.strip()
        time.sleep(1)
    raise AssertionError(f"no seff line for job {job_id} within {timeout} s")


def test_srun_epilog_prints_the_seff_line_in_the_jobs_output(cluster: Cluster) -> None:
    token = cluster.user_tokens.get(USER)
    if not token:
        pytest.skip("this iolens has no user accounts (iolens user add)")
    d = cluster.jobs_dir
    script = (
        # synchronous 4 KiB writes: I/O time well above the line's 0.1 s rounding (a job
        # whose I/O rounds to 0 s and has no finding gets no line, by design)
        f"srun dd if=/dev/zero of={d}/seff-$SLURM_JOB_ID bs=4k count=4096 oflag=dsync "
        "2>/dev/null; "
        f"while [ ! -e {d}/go-$SLURM_JOB_ID ]; do sleep 0.5; done; "
        f"srun -o {d}/seff-task-%j.out true; rm -f {d}/seff-$SLURM_JOB_ID"
    )
    job = cluster.sbatch(
        USER, "seffepi", "-N1 -n1", script, wait=False, env={"IOLENS_TOKEN": token}
    )
    try:
        line = _server_line(cluster, job.job_id, token)
    finally:
        (d / f"go-{job.job_id}").touch()
    cluster.wait_gone(job)
    lines = [x for x in job.out.splitlines() if x.startswith("iolens: job ")]
    # after the second step the server knows at least what it knew before it
    assert lines, job.out
    assert all(x.startswith(f"iolens: job {job.job_id}: I/O ") for x in lines), lines
    head = line.split(";")[0].rsplit(",", 1)[0]  # "iolens: job N: I/O T s (S of the run)"
    assert any(x.startswith(head.split(" (")[0]) for x in lines), (line, lines)
    assert "iolens: job" not in (d / f"seff-task-{job.job_id}.out").read_text()
