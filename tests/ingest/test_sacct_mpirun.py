"""sacct import of a job whose ranks mpirun started inside the allocation (issue 9)."""

from __future__ import annotations

import json

from iolens.ingest.importers import sacct
from tests.conftest import run_cli
from tests.loopback import TOKEN, free_port, start_server, stop

# As the mini cluster's sacct printed it for `sbatch -N4 -n4 --wrap "mpirun prog"`: the
# batch step runs mpirun (1 task), step 0 runs OpenMPI's orted on the three other nodes.
TEXT = (
    "JobID|User|JobName|NodeList|NNodes|NTasks|NCPUS|Start|End|State\n"
    "12|iolensa|mpi-nm|c[1-4]|4||4|2026-01-01T00:00:00|2026-01-01T00:00:09|COMPLETED\n"
    "12.batch||batch|c1|1|1|1|2026-01-01T00:00:00|2026-01-01T00:00:09|COMPLETED\n"
    "12.extern||extern|c[1-4]|4|4|4|2026-01-01T00:00:00|2026-01-01T00:00:09|COMPLETED\n"
    "12.0||orted|c[2-4]|3|3|3|2026-01-01T00:00:01|2026-01-01T00:00:08|COMPLETED\n"
    "13|iolensa|mpi-n1|c[1-4]|4||4|2026-01-01T00:01:00|2026-01-01T00:01:09|COMPLETED\n"
    "13.batch||batch|c1|1|1|1|2026-01-01T00:01:00|2026-01-01T00:01:09|COMPLETED\n"
    "13.0||mpiio_bench|c[1-4]|4|4|4|2026-01-01T00:01:01|2026-01-01T00:01:08|COMPLETED\n"
)


def test_mpirun_jobs_count_their_slots_not_the_launcher_daemons():
    batch, rows = sacct.batch_of_text(TEXT, "t.txt", tz="UTC")
    jobs = {r["job_id"]: r for r in batch.jobs.to_pylist()}
    assert rows == 7
    assert jobs["12"]["nprocs"] == 4  # not the 3 orted daemons of step 0
    assert jobs["13"]["nprocs"] == 4  # srun's step: its tasks, as before


def test_import_sacct_through_the_server(tmp_path):
    """`iolens import sacct --server`: a site's periodic import while the server owns the
    store; a second import of the same output adds nothing."""
    db, port = tmp_path / "s.duckdb", free_port()
    url = f"http://127.0.0.1:{port}"
    (tmp_path / "sacct.txt").write_text(TEXT)
    server = start_server(db, port, tmp_path / "server.log")
    try:
        args = ("import", "sacct", str(tmp_path / "sacct.txt"), "--tz", "UTC")
        first = run_cli(*args, "--server", url, "--token", TOKEN, "--json")
        again = run_cli(*args, "--server", url, "--token", TOKEN, "--json")
        bad = run_cli(*args, "--server", url, "--token", "wrong", "--json")
        rep = run_cli("job", "12", "--server", url, "--token", TOKEN, "--json")
    finally:
        stop(server)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) | {"file": None} == {
        "file": None, "rows": 7, "jobs": 2, "loaded": 2, "duplicate": False
    }  # fmt: skip
    assert json.loads(again.stdout)["duplicate"] is True
    assert bad.returncode != 0
    job = json.loads(rep.stdout)
    assert (job["user"], job["nprocs"], job["node_list"]) == (
        "iolensa",
        4,
        ["c1", "c2", "c3", "c4"],
    )
    assert (job["start"], job["end"]) == ("2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z")
