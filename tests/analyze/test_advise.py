"""Learned settings (SIOX GenericHistory): a simulated history where one setting is known
best, written straight into a store with the model's Arrow schemas. Its Darshan logs carry
`h=` metadata (Darshan's own log-writing hints) that tracks the best runs: never advised."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.analyze.advise import advise, lfs_size
from iolens.model.ids import file_id
from iolens.model.schema import DARSHAN_LOGS, DARSHAN_RECORDS, FILES, JOB_SUMMARIES, JOBS
from iolens.store import DuckDBStore
from tests.conftest import SHARED_DATA, run_cli

T0 = datetime(2025, 1, 6, 8, 0)
GB = 1e9
OSTS = [f"lustre-OST{i:04x}" for i in range(16)]

A = "romio_no_indep_rw=true;cb_nodes=4"
B = "romio_cb_write=enable;cb_nodes=16;romio_ds_write=disable"
D = "cb_nodes=64"
# (user, hints, stripe count, stripe size, io mode, bandwidth), oldest first: B with 8 x 4
# MiB stripes is best (one noisy slow run); D was tried once and looked great, which is not
# enough; alice's newest runs (her current setting) use 4 x 1 MiB stripes, bob's B.
HISTORY = (
    [("alice", D, 16, 16 << 20, "N-1", 10.0)]
    + [("alice", A, 1, 1 << 20, "N-1", bw) for bw in (1.0, 1.2, 1.1, 0.9)]
    + [("alice", B, 8, 4 << 20, "N-1", bw) for bw in (3.1, 3.3, 0.8, 3.0, 3.4)]
    + [("alice", "no", 4, 1 << 20, "N-N", bw) for bw in (2.0, 2.1, 1.9)]
    + [("bob", B, 8, 4 << 20, "N-1", bw) for bw in (3.0, 3.2, 2.9)]
)


def build(path: Path, mounts: list[list[str]] | None = None, history=HISTORY) -> DuckDBStore:
    store = DuckDBStore(path)
    jobs, sums, files, logs, recs = [], [], [], [], []
    for i, (user, hints, count, size, mode, bw) in enumerate(history):
        job = f"{1000 + i}"
        start = T0 + timedelta(hours=i)
        jobs.append(
            {
                "job_id": job,
                "user": user,
                "app": "wrf",
                "nodes": ["n1", "n2"],
                "nprocs": 64,
                "start": start,
                "end": start + timedelta(minutes=30),
                "state": "COMPLETED",
                "source": "darshan",
            }
        )
        moved = int(bw * GB * 100)  # 100 s of I/O at the run's bandwidth
        sums.append(
            {
                "job_id": job,
                "io_mode": mode,
                "read_bytes": moved // 4,
                "write_bytes": moved - moved // 4,
                "io_time_s": 100.0,
                "io_procs": 64,
                "io_nodes": 2,
                "findings": 0,
                "analyzed": start + timedelta(minutes=31),  # after its end: final
            }
        )
        key = f"log-{job}"
        logs.append(
            {
                "job_id": job,
                "log_key": key,
                "exe": "/apps/wrf/wrf.exe",
                "nprocs": 64,
                "start": start,
                "end": start + timedelta(minutes=30),
                "metadata": json.dumps({"lib_ver": "3.4.4", "h": hints}),
                "mounts": json.dumps(mounts or []),
                "modules": json.dumps({"POSIX": {"version": 4, "records": 2, "partial": False}}),
            }
        )
        run_dir = f"/lustre/{user}/wrf/run{i:02d}"
        for name, (c, s) in (("out.h5", (count, size)), ("rsl.log", (1, 1 << 20))):
            p = f"{run_dir}/{name}"
            files.append({"file_id": file_id(p), "path": p, "stripe_size": s, "osts": OSTS[:c]})
            recs.append(
                {"log_key": key, "module": "POSIX", "record_id": file_id(p), "rank": -1, "path": p}
            )
    for name, rows, schema in (
        ("jobs", jobs, JOBS),
        ("job_summaries", sums, JOB_SUMMARIES),
        ("files", files, FILES),
        ("darshan_logs", logs, DARSHAN_LOGS),
        ("darshan_records", recs, DARSHAN_RECORDS),
    ):
        store.append(name, pa.Table.from_pylist(rows, schema=schema))
    return store


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.duckdb"
    build(path).close()
    return path


def test_picks_the_known_best_setting_with_its_evidence(db):
    with DuckDBStore(db) as store:
        rep = advise(store, "wrf", user="alice", ext=".h5")
    assert rep["advice"] and rep["trials"] == 13
    stripe = rep["settings"]["stripe"]
    assert stripe["best"] == "-c 8 -S 4M" and stripe["runs"] == 5
    assert stripe["current"] == "-c 4 -S 1M" and stripe["current_median_bw"] == 2.0 * GB
    assert stripe["median_bw"] == pytest.approx(3.1 * GB)
    assert stripe["gain"] == pytest.approx(3.1 / 2.0, abs=0.01)  # over the current setting
    # 4 of B's 5 runs beat all 3 current ones: U = 12 of 15; exact one-sided p = P(U >= 12)
    # over the C(8, 3) = 56 rankings: U = 15, 14, 13, 12 in 1, 1, 2, 3 of them
    assert stripe["evidence"]["p_value"] == pytest.approx(7 / 56, abs=1e-3)
    assert stripe["confidence"] == "low"  # p > 0.05: said, not hidden
    lo, hi = stripe["evidence"]["gain_interval"]
    assert lo <= stripe["gain"] <= hi
    # D's single 10 GB/s run is not advised, only offered for a retry
    assert stripe["retry"] == [{"setting": "-c 16 -S 16M", "runs": 1, "median_bw": 10.0 * GB}]
    by = {s["setting"]: s for s in stripe["settings"]}
    assert by["-c 4 -S 1M"]["runs"] == 3 and by["-c 16 -S 16M"]["runs"] == 1
    assert rep["settings"]["io_mode"]["settings"]  # evidence per I/O mode as well
    assert rep["lfs_setstripe"] == "lfs setstripe -c 8 -S 4M /lustre/alice/wrf"


def test_darshans_own_log_hints_are_never_advised(db):
    """Each log's h= is the hints Darshan wrote the log with, not the run's: today's code
    advised B's ROMIO hints file (2x better) from them."""
    with DuckDBStore(db) as store:
        rep = advise(store, "wrf", user="alice", ext=".h5")
    assert rep["advice"] and set(rep["settings"]) == {"stripe", "io_mode"}
    assert "romio_hints_file" not in rep
    assert "cb_nodes" not in json.dumps(rep)


def test_without_filters_the_same_setting_wins(db):
    with DuckDBStore(db) as store:
        rep = advise(store, "wrf")
    assert rep["trials"] == len(HISTORY)
    assert rep["settings"]["stripe"]["best"] == "-c 8 -S 4M"
    assert rep["lfs_setstripe"] == "lfs setstripe -c 8 -S 4M /lustre"  # alice's and bob's dirs


def test_setstripe_never_names_a_mount_point(tmp_path: Path):
    """The logs' mount tables say /lustre is the file system's root: its layout is every
    new file's default, so the advice names no directory there."""
    build(tmp_path / "m.duckdb", mounts=[["/lustre", "lustre"], ["/", "ext4"]]).close()
    with DuckDBStore(tmp_path / "m.duckdb") as store:
        everyone = advise(store, "wrf")
        alice = advise(store, "wrf", user="alice", ext=".h5")
    assert everyone["lfs_setstripe"] == "lfs setstripe -c 8 -S 4M DIR"
    assert alice["lfs_setstripe"] == "lfs setstripe -c 8 -S 4M /lustre/alice/wrf"


def test_moosefs_chunkservers_are_no_stripes(tmp_path: Path):
    """Files on MooseFS list chunkservers (IP:PORT) where Lustre files list OSTs: no stripe
    setting is learnt from them, and no lfs line is printed."""
    path = tmp_path / "mfs.duckdb"
    build(path).close()
    with DuckDBStore(path) as store:
        store.execute(
            "UPDATE files SET osts = list_transform(osts, lambda o: '10.0.0.' || o[-1:] || ':9422')"
        )
        rep = advise(store, "wrf")
    assert rep["advice"] and "stripe" not in rep["settings"] and rep["lfs_setstripe"] is None


def test_fewer_than_five_trials_give_no_advice(db):
    with DuckDBStore(db) as store:
        bob = advise(store, "wrf", user="bob")
        other = advise(store, "wrf", ext=".nc")
        unknown = advise(store, "nosuchapp")
    assert bob["advice"] is False and bob["trials"] == 3
    assert "3 run(s)" in bob["reason"] and "at least 5" in bob["reason"]
    assert "settings" not in bob
    assert other["advice"] is False and other["trials"] == 0
    assert unknown["advice"] is False


def test_helpers():
    assert [lfs_size(n) for n in (4 << 20, 1 << 30, 65536, 1000)] == ["4M", "1G", "64K", "1000"]


def test_cli(db):
    res = run_cli("advise", "wrf", "--db", str(db), "--user", "alice", "--ext", "h5")
    assert res.returncode == 0, res.stderr
    assert "romio" not in res.stdout and "MPI-IO hints" not in res.stdout
    assert "lfs setstripe -c 8 -S 4M /lustre/alice/wrf" in res.stdout
    assert "Lustre striping" in res.stdout
    res = run_cli("advise", "wrf", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["settings"]["stripe"]["best"] == "-c 8 -S 4M"
    res = run_cli("advise", "wrf", "--db", str(db), "--user", "bob")
    assert res.returncode == 0 and "No advice yet" in res.stdout and "at least 5" in res.stdout


def test_never_advises_a_setting_measured_worse_than_the_current_one(tmp_path: Path):
    """The issue's `advise awp`: the setting tried most was 11x slower than one tried once
    and was advised ("gain 0.09"). Here the newest run (the current setting, tried once)
    is 5x faster than the only setting tried twice: nothing is advised, the current
    setting is kept, and the lone fast run is offered for a retry."""
    history = [("carol", "no", 1, 1 << 20, "N-1", bw) for bw in (0.5, 0.4, 0.6, 0.5)] + [
        ("carol", "no", 4, 1 << 20, "N-1", 2.5)
    ]
    build(tmp_path / "c.duckdb", history=history).close()
    with DuckDBStore(tmp_path / "c.duckdb") as store:
        rep = advise(store, "wrf")
    stripe = rep["settings"]["stripe"]
    assert stripe["current"] == "-c 4 -S 1M" and stripe["current_median_bw"] == 2.5 * GB
    assert stripe["best"] is None and stripe["gain"] is None
    assert "did better than the current" in stripe["reason"]
    assert stripe["retry"] == []  # the faster setting is the current one itself: kept
    assert rep["lfs_setstripe"] is None
    res = run_cli("advise", "wrf", "--db", str(tmp_path / "c.duckdb"))
    assert res.returncode == 0, res.stderr
    assert "No recommendation" in res.stdout and "lfs setstripe" not in res.stdout


def test_simulated_awp_advice_is_backed_by_its_own_table(sim_db):
    """On the simulated store: every recommended setting was tried at least twice, has
    the highest median of those, and beats the current setting's measured outcome."""
    with sim_db.store() as store:
        rep = advise(store, "awp")
    if not rep["advice"]:
        pytest.skip(rep["reason"])
    stripe = rep["settings"]["stripe"]
    assert sum(s["runs"] for s in stripe["settings"]) == rep["trials"]
    for c in rep["settings"].values():
        cur = next(s for s in c["settings"] if s["current"])
        assert cur["setting"] == c["current"]
        if c["best"] is None:
            continue
        best = next(s for s in c["settings"] if s["setting"] == c["best"])
        assert best["runs"] >= 2
        assert best["median_bw"] >= cur["median_bw"]
        assert best["median_bw"] == max(s["median_bw"] for s in c["settings"] if s["runs"] >= 2)
        assert c["gain"] is None or c["gain"] >= 1.0
    if stripe["best"] is None:
        assert rep["lfs_setstripe"] is None
    else:
        assert rep["lfs_setstripe"].startswith(f"lfs setstripe {stripe['best']} ")


RELEASE = SHARED_DATA / "darshan-logs" / "release_logs"
RELEASE_VERSIONS = ("3.4.4", "3.4.5", "3.4.6", "3.4.7", "3.5.0")
#: five mpi-io-test runs; 3.4.6, 3.4.7 and 3.5.0 wrote to Polaris's Lustre /home
MPI_IO_TEST = [RELEASE / f"mpi-io-test-x86_64-{v}.darshan" for v in RELEASE_VERSIONS]


@pytest.mark.skipif(not RELEASE.is_dir(), reason="../shared/data not available")
def test_real_mpi_io_test_runs_advise_neither_darshans_hints_nor_a_root(tmp_path: Path):
    """Today's advice on these logs: a ROMIO hints file `cb_nodes 4` / `romio_no_indep_rw
    true` (Darshan's own log-writing hints) and `lfs setstripe -c 1 -S 1M /home`, the root
    of Polaris's /home Lustre file system (the logs' mount tables say so)."""
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.ingest.importers.darshan import import_logs

    with DuckDBStore(tmp_path / "real.duckdb") as store:
        import_logs(store, MPI_IO_TEST)
        analyze_jobs(store)
        rep = advise(store, "mpi-io-test")
    assert rep["advice"] and rep["trials"] == 5
    assert "romio_hints_file" not in rep and "cb_nodes" not in json.dumps(rep)
    assert rep["settings"]["stripe"]["best"] == "-c 1 -S 1M"
    assert rep["lfs_setstripe"] == "lfs setstripe -c 1 -S 1M DIR"


def test_a_summary_made_while_the_job_ran_is_analysed_again(db):
    """A live analysis (summary older than the job's end) is partial: advise's listing
    analyses that job again; a summary from after the end, or of a job still to end, not."""
    from iolens.store.queries import unanalyzed_jobs

    with DuckDBStore(db) as store:
        assert unanalyzed_jobs(store) == []
        store.execute(
            "UPDATE job_summaries SET analyzed = ? WHERE job_id = "
            "(SELECT min(job_id) FROM job_summaries)",
            [T0 - timedelta(hours=1)],
        )
        first = store.query("SELECT min(job_id) AS j FROM job_summaries").column("j")[0].as_py()
        assert unanalyzed_jobs(store) == [first]
        future = datetime.now() + timedelta(days=365)  # naive, like the store
        store.execute('UPDATE jobs SET "end" = ? WHERE job_id = ?', [future, first])
        assert unanalyzed_jobs(store) == []


def test_runs_that_did_not_finish_are_no_evidence(db):
    """A crashed, killed or timed-out run measured nothing about its settings."""
    with DuckDBStore(db) as store:
        before = advise(store, "wrf", user="bob")
        store.execute(
            "UPDATE jobs SET state = 'CANCELLED by 0' WHERE job_id = (SELECT min(job_id) "
            "FROM jobs WHERE \"user\" = 'bob')"
        )
        after = advise(store, "wrf", user="bob")
        store.execute("UPDATE jobs SET state = 'FAILED' WHERE \"user\" = 'bob'")
        failed = advise(store, "wrf", user="bob")
    assert before["trials"] == 3 and after["trials"] == 2 and failed["trials"] == 0
